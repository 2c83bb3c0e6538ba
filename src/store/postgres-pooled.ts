import type pg from 'pg';
import type { GroupStats, PromptState } from '../posterior/state.js';
import { POOLED_COLUMNS, POOLED_META_KEY, pooledOf, pooledValues, statsOfValues } from './pooled.js';

/** The pooled rows in PostgreSQL (store/pooled.ts): the table, its first fill, updates, reads. */
export const pooledTableSql = (s: string) =>
  `CREATE TABLE IF NOT EXISTS ${s}.pooled (scope TEXT COLLATE "C" PRIMARY KEY, ${POOLED_COLUMNS.map((c) => `${c} DOUBLE PRECISION NOT NULL`).join(', ')});`;

/**
 * Fills the pooled rows from the prompts once (a state written before they existed, or a new
 * one): run inside the schema transaction, under its advisory lock. `readAll` reads every prompt.
 */
export async function buildPooled(c: pg.PoolClient, s: string, readAll: () => Promise<PromptState[]>): Promise<void> {
  // Read first: a state whose rows are built needs no write here, so a role that may only read
  // it (a teammate's inspect) opens it too. INSERT ... ON CONFLICT DO NOTHING asks for INSERT.
  const built = await c.query(`SELECT 1 FROM ${s}.meta WHERE key = $1`, [POOLED_META_KEY]);
  if (built.rowCount !== 0) return;
  const mark = await c.query(`INSERT INTO ${s}.meta (key, value) VALUES ($1, 1) ON CONFLICT (key) DO NOTHING RETURNING key`, [POOLED_META_KEY]);
  if (mark.rowCount === 0) return;
  const states = await readAll();
  if (states.length === 0) return;
  await addPooled(c, s, [...pooledOf(states)].map(([scope, stats]) => [scope, pooledValues(stats)]));
}

/** Adds each scope's change to its pooled row (scopes sorted: rows locked in one order). */
export async function addPooled(c: pg.PoolClient, s: string, entries: readonly [string, number[]][]): Promise<void> {
  if (entries.length === 0) return;
  const columns = POOLED_COLUMNS.map((_, k) => entries.map(([, v]) => v[k]!));
  await c.query(
    `INSERT INTO ${s}.pooled AS p (scope, ${POOLED_COLUMNS.join(', ')})
     SELECT * FROM unnest($1::text[], ${POOLED_COLUMNS.map((_, k) => `$${k + 2}::float8[]`).join(', ')})
     ON CONFLICT (scope) DO UPDATE SET ${POOLED_COLUMNS.map((col) => `${col} = p.${col} + excluded.${col}`).join(', ')}`,
    [entries.map(([scope]) => scope), ...columns],
  );
}

/** The pooled rows of `scopes`. */
export async function readPooled(c: pg.PoolClient, s: string, scopes: readonly string[]): Promise<Map<string, GroupStats>> {
  const { rows } = await c.query<Record<string, number | string>>(`SELECT scope, ${POOLED_COLUMNS.join(', ')} FROM ${s}.pooled WHERE scope = ANY($1::text[])`, [scopes]);
  return new Map(rows.map((r) => [r.scope as string, statsOfValues(POOLED_COLUMNS.map((col) => r[col] as number))]));
}


