import type pg from 'pg';
import type { GroupStats, PromptState } from '../posterior/state.js';
import { POOLED_COLUMNS, statsOfValues } from './pooled.js';

/**
 * What a plan reads of a PostgreSQL state (store/pooled.ts) in one statement: the last step,
 * the candidates' prompt rows, and the pooled rows of the scopes asked for and of the groups
 * those prompts are in. One statement sees one snapshot of the database, as the REPEATABLE
 * READ transaction of three reads does (PostgresStore.snapshot), in one round trip to the
 * server where that takes five (BEGIN, the reads, COMMIT): under concurrent plans each is a
 * wait for the server's process and for this event loop.
 *
 * The three kinds of rows come as one result (UNION ALL) in the prompt rows' columns, so every
 * number is parsed as before (float8 text); a pooled row carries its scope in `id` and its
 * figures in the first POOLED_COLUMNS.length number columns, the last step in the first one.
 * The hinted prompts (the hint calibration's data) are not read here: a caller that needs
 * them reads in a transaction.
 */
export interface PartialRows {
  readonly lastStep: number | null;
  readonly prompts: PromptState[];
  readonly pooled: Map<string, GroupStats>;
}

/** The number columns of a prompt row, in `columns` order after id and grp. */
const NUMBERS = ['successes', 'failures', 'last_step', 'rollouts', 'reward_sum', 'correct_count', 'correct_tokens', 'wrong_count', 'wrong_tokens', 'prior_pass_rate', 'prior_samples'];

const PROMPT = 0;
const POOLED = 1;
const LAST_STEP = 2;

/**
 * $1 the ids (text[]), $2 the scopes asked for (text[]). `columns` selects a prompt row (id,
 * grp, then NUMBERS as float8); `from` joins $1 with the prompts table (a key lookup an id).
 */
function partialSql(s: string, columns: string, from: string): string {
  const pad = (k: number) => Array.from({ length: k }, () => 'NULL').join(', ');
  return `WITH cand AS (SELECT ${columns} ${from})
SELECT ${PROMPT} AS kind, * FROM cand
UNION ALL SELECT ${POOLED}, scope, NULL, ${POOLED_COLUMNS.join(', ')}, ${pad(NUMBERS.length - POOLED_COLUMNS.length)} FROM ${s}.pooled
  WHERE scope IN (SELECT unnest($2::text[]) UNION SELECT 'group:' || grp FROM cand WHERE grp IS NOT NULL)
UNION ALL SELECT ${LAST_STEP}, NULL, NULL, value::float8, ${pad(NUMBERS.length - 1)} FROM ${s}.meta WHERE key = 'last_step'`;
}

/**
 * Reads the partial rows in one statement (see above), each row as an array (pg's rowMode
 * 'array': no object of named fields a row), a prompt row made into its state by `stateOf`
 * from its values after `kind`. O(ids + scopes).
 */
export async function readPartial(
  query: (config: pg.QueryArrayConfig) => Promise<{ rows: unknown[][] }>, s: string, columns: string, from: string, ids: readonly string[], scopes: readonly string[],
  stateOf: (row: readonly unknown[], at: number) => PromptState,
): Promise<PartialRows> {
  const { rows } = await query({ text: partialSql(s, columns, from), values: [ids, scopes], rowMode: 'array' });
  const prompts: PromptState[] = [];
  const pooled = new Map<string, GroupStats>();
  let lastStep: number | null = null;
  for (const row of rows) {
    const kind = row[0];
    if (kind === PROMPT) prompts.push(stateOf(row, 1));
    else if (kind === POOLED) pooled.set(row[1] as string, statsOfValues(POOLED_COLUMNS.map((_, k) => row[3 + k] as number)));
    else lastStep = row[3] as number;
  }
  return { lastStep, prompts, pooled };
}
