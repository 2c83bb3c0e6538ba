/**
 * PostgreSQL inputs of `npm run bench` (only with RB_PG_URL): fresh schemas, and warm states
 * of N prompts written straight into the table (as bench-inputs.ts does for SQLite). Every
 * schema made here is dropped by `dropAll`.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { PostgresStore } from '../src/index.js';
import { passRate } from './bench-inputs.js';

const made: string[] = [];

function schemaUrl(base: string): { url: string; schema: string } {
  const u = new URL(base);
  const schema = `bench_${randomBytes(5).toString('hex')}`;
  u.searchParams.set('schema', schema);
  made.push(schema);
  return { url: u.toString(), schema };
}

async function drop(base: string, schema: string): Promise<void> {
  const client = new pg.Client({ connectionString: base });
  await client.connect();
  try {
    await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  } finally {
    await client.end();
  }
}

/**
 * Throws, naming the URL (without its password) and the server's answer, when no PostgreSQL
 * server answers at `base`: checked before the bench's first section, so that a stopped server
 * costs a line, not the minutes of figures before the first PostgreSQL one.
 */
export async function checkServer(base: string): Promise<void> {
  const client = new pg.Client({ connectionString: base, connectionTimeoutMillis: 10_000 });
  try {
    await client.connect();
    await client.query('SELECT 1');
  } catch (error) {
    const u = new URL(base);
    if (u.password !== '') u.password = '***';
    throw new Error(`RB_PG_URL ${u.toString()}: no PostgreSQL server answers (${(error as Error).message}); start one (.ci/setup-postgres.sh start prints the URL) or unset RB_PG_URL`);
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** A new empty schema and its dropper. */
export function freshSchema(base: string): () => Promise<{ url: string; drop: () => Promise<void> }> {
  return async () => {
    const { url, schema } = schemaUrl(base);
    return { url, drop: () => drop(base, schema) };
  };
}

/** A state of `size` prompts (90% seen, as bench-inputs warmState), its pooled rows built on connect. */
export function pgStates(base: string): (size: number) => Promise<string> {
  const states = new Map<number, string>();
  return async (size) => {
    const known = states.get(size);
    if (known !== undefined) return known;
    const { url, schema } = schemaUrl(base);
    await (await PostgresStore.connect(url)).close();
    const client = new pg.Client({ connectionString: base });
    await client.connect();
    try {
      let x = size + 3;
      const random = () => {
        x = (Math.imul(x, 1103515245) + 12345) >>> 0;
        return x / 4294967296;
      };
      for (let from = 0; from < size; from += 20_000) {
        const cols: number[][] = [[], [], [], [], []];
        const ids: string[] = [];
        for (let i = from; i < Math.min(size, from + 20_000); i++) {
          if (i % 10 === 9) continue;
          const n = 8 * (1 + Math.floor(random() * 6));
          let k = 0;
          for (let j = 0; j < n; j++) if (random() < passRate(i)) k++;
          ids.push(`prompt-${i}`);
          cols[0]!.push(k);
          cols[1]!.push(n - k);
          cols[2]!.push(Math.floor(random() * 20));
          cols[3]!.push(n);
          cols[4]!.push(k * 400);
        }
        await client.query(`INSERT INTO "${schema}".prompts (id, grp, successes, failures, last_step, rollouts, reward_sum, correct_count, correct_tokens, wrong_count, wrong_tokens)
          SELECT id, NULL, s, f, l, r, s, s, t, f, f * 700 FROM unnest($1::text[], $2::float8[], $3::float8[], $4::bigint[], $5::bigint[], $6::float8[]) AS u(id, s, f, l, r, t)`,
        [ids, ...cols]);
      }
      await client.query(`INSERT INTO "${schema}".meta (key, value) VALUES ('last_step', 19) ON CONFLICT (key) DO UPDATE SET value = 19`);
      await client.query(`DELETE FROM "${schema}".pooled; DELETE FROM "${schema}".meta WHERE key = 'pooled_version'`);
    } finally {
      await client.end();
    }
    await (await PostgresStore.connect(url)).close(); // builds the pooled rows
    states.set(size, url);
    return url;
  };
}

/** Drops every schema this run made. */
export async function dropAll(base: string): Promise<void> {
  for (const schema of made.splice(0)) await drop(base, schema);
}
