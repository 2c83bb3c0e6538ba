import { importIntoPostgres } from '../store/postgres-import.js';
import { sqliteStateNotes } from '../store/file-identity.js';
import { SqliteSource } from '../store/sqlite-source.js';
import { redactUrl } from '../store/url.js';
import type { CliIo } from './io.js';

/**
 * `backup --out postgres://...?schema=<name>`: the SQLite state at `state` copied into that
 * schema (store/postgres-import.ts importIntoPostgres), read in one read transaction
 * (store/sqlite-source.ts), written in one PostgreSQL transaction: the schema holds the whole
 * copy or nothing of it. A schema that already holds a state is refused, never merged.
 *
 * The file's partial rollouts (executor/partials.ts `partial_rollouts`: unfinished generations
 * that `execute` and `loop` resume) are not copied: a PostgreSQL state has no table for them,
 * and execute and loop keep them in a SQLite file only (they refuse a PostgreSQL --state). They
 * stay in the file, where the next execute on it resumes them; a note says how many.
 *
 * Prints `{"out","prompts","last_step","rollout_ids"}`: the URL (password hidden), the prompts
 * observed (as `inspect` counts them), the last step and the claimed rollout ids copied; there
 * is no file, so no `bytes`.
 */
export async function backupToPostgres(io: CliIo, state: string, out: string): Promise<void> {
  for (const note of sqliteStateNotes(state)) io.stderr(`rollout-budget: note: ${note}\n`);
  const source = SqliteSource.open(state);
  try {
    const partials = source.partialRollouts();
    const copied = await importIntoPostgres(out, source);
    if (partials > 0) {
      io.stderr(`rollout-budget: note: ${state} keeps ${partials} partial rollout${partials === 1 ? '' : 's'} for execute and loop to resume; a PostgreSQL state has no table for them, so they were not copied and stay in ${state}\n`);
    }
    io.stdout(`${JSON.stringify({ out: redactUrl(out), prompts: copied.prompts, last_step: copied.lastStep, rollout_ids: copied.rolloutIds })}\n`);
  } finally {
    source.close();
  }
}
