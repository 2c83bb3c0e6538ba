import type Database from 'better-sqlite3';
import { closeSync, existsSync, fsyncSync, openSync, readSync, renameSync, rmSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { RolloutBudgetError } from '../errors.js';
import { isSqliteStart, SQLITE_MAGIC } from '../io/file-kind.js';
import { statIfThere } from '../io/paths.js';
import { ATTEMPT_MS } from '../store/busy.js';
import { sqliteStateNotes } from '../store/file-identity.js';
import { SqliteStore } from '../store/sqlite.js';
import { vacuumInto } from '../store/sqlite-copy.js';
import { sqliteDriver } from '../store/sqlite-driver.js';
import { lastStepReader } from '../store/sqlite-last-step.js';
import { openRollbackReadOnly } from '../store/sqlite-read-only.js';
import { checkStateKind, foreignTables } from '../store/state-kind.js';
import { cannotOpen } from '../store/unavailable.js';
import { isPostgresUrl, redactUrl } from '../store/url.js';
import { checkOutput, onEndingSignal, outputTarget, type CliIo } from './io.js';
import { removeStaleTemps } from './stale-temps.js';
import { isNewStateFile } from './new-state.js';
import { isEmptyFile, printNotes } from './state-commands.js';

/**
 * `backup`: a consistent copy of a SQLite state at `--out` (SqliteStore.copyTo), written to a
 * temp file beside it, synced, then renamed over it: `--out` is the old file or the whole new
 * one. It replaces only a SQLite file with no -wal or -shm beside it (one no process has
 * open): not a results file given by mistake, not a state in use. Prints what the copy holds.
 * An `--out` that is a postgres:// URL copies the state into that schema instead
 * (cli/backup-postgres.ts).
 */
export async function backupCommand(io: CliIo, opts: { state: string; out: string }): Promise<void> {
  const { state, out } = opts;
  if (isPostgresUrl(state)) {
    throw new RolloutBudgetError('BAD_OPTION', `--state ${redactUrl(state)}: backup copies a SQLite state file; copy a PostgreSQL state's schema with pg_dump --schema <schema>`);
  }
  if (state === ':memory:' || isNewStateFile(state)) throw new RolloutBudgetError('BAD_OPTION', `--state ${state}: no state file there to copy (nothing was created)`);
  if (isEmptyFile(state)) throw new RolloutBudgetError('BAD_OPTION', `--state ${state}: the file is empty (0 bytes), not a state: nothing to copy (a copy cut at its start?)`);
  // Into PostgreSQL: checkOutput refuses a URL as a file path (other commands' --out); backup takes it.
  if (isPostgresUrl(out)) return (await import('./backup-postgres.js')).backupToPostgres(io, state, out);
  if (out === '-') throw new RolloutBudgetError('BAD_OPTION', '--out -: a state is a SQLite file, not text for stdout: give a file path');
  checkOutput(out);
  const there = statIfThere(out);
  // As plan's --out: a symlink stays one, the file it leads to is replaced (its -wal and -shm are beside that file).
  const { path: target, atomic } = outputTarget(out);
  if (there !== undefined) {
    const source = statSync(state);
    if (there.dev === source.dev && there.ino === source.ino) throw new RolloutBudgetError('BAD_OPTION', `--out ${out} is the state file itself: give another path`);
    if (!atomic || !isSqliteFile(target)) throw new RolloutBudgetError('BAD_OPTION', `--out ${out}: there is a file there that is not a SQLite state; backup replaces only a state file: give another path`);
    const open = ['-wal', '-shm'].filter((suffix) => existsSync(`${target}${suffix}`));
    if (open.length > 0) {
      throw new RolloutBudgetError('STATE_ERROR', `--out ${out}: a state with ${open.map((s) => `${target}${s}`).join(' and ')} beside it, so a process may have it open: stop what uses it (and remove those files) before replacing it, or give another path`);
    }
    const foreign = foreignDatabase(target);
    if (foreign !== undefined) {
      throw new RolloutBudgetError('BAD_OPTION', `--out ${out}: a SQLite database of another program (its tables: ${foreign}), not a rollout-budget state; backup replaces only a state file: give another path`);
    }
  }
  const tmp = `${target}.tmp-${process.pid}`;
  rmSync(tmp, { force: true });
  removeStaleTemps(target);
  // In place before the copy's file is made: a Ctrl-C right after it met Node's default action.
  const forget = onEndingSignal(() => rmSync(tmp, { force: true }));
  try {
    closeSync(openSync(tmp, 'wx')); // VACUUM INTO takes an empty file; made first, so a folder it cannot write is named as such
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? String(error);
    const why = code === 'EACCES' || code === 'EPERM' ? `: this user (uid ${process.getuid?.() ?? '?'}) cannot write the folder ${dirname(resolve(tmp))}` : code === 'EROFS' ? `: the folder ${dirname(resolve(tmp))} is on a read-only file system` : '';
    forget();
    throw new RolloutBudgetError('IO_ERROR', `--out ${out}: cannot write the copy there (${code}${why}); the state is as it was`);
  }
  let store: SqliteStore | undefined;
  try {
    if (!copyReadOnly(io, state, tmp, out)) {
      store = new SqliteStore(state);
      printNotes(io, store);
      store.copyTo(tmp, out);
    }
    const fd = openSync(tmp, 'r+');
    try {
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    const held = copySummary(tmp);
    renameSync(tmp, target);
    io.stdout(`${JSON.stringify({ out, ...held, bytes: statSync(out).size })}\n`);
  } catch (error) {
    rmSync(tmp, { force: true });
    if (error instanceof RolloutBudgetError) throw error;
    throw new RolloutBudgetError('IO_ERROR', `${out}: cannot write the copy (${(error as NodeJS.ErrnoException).code ?? String(error)})`);
  } finally {
    store?.close();
    forget();
  }
}

function isSqliteFile(path: string): boolean {
  const fd = openSync(path, 'r');
  try {
    const head = Buffer.alloc(SQLITE_MAGIC.length);
    return isSqliteStart(head.subarray(0, readSync(fd, head, 0, head.length, 0)));
  } finally {
    closeSync(fd);
  }
}

/**
 * The tables of another program's SQLite database at `path` (state-kind.ts foreignTables, as
 * observe refuses such a file as a state: backup replaced it whole); undefined for a state, an
 * empty database, or one that cannot be read (then the copy's own checks decide).
 */
function foreignDatabase(path: string): string | undefined {
  let db: Database.Database | undefined;
  try {
    const driver = sqliteDriver();
    // Read-write, so that closing the only connection removes the -wal and -shm a state in WAL
    // mode gets on open (none were there: checked above); a read-only one would leave them.
    db = new driver.Database(path, { fileMustExist: true, ...driver.options }) as Database.Database;
    return foreignTables(db);
  } catch {
    return undefined;
  } finally {
    db?.close();
  }
}

/**
 * Copies the state into `tmp` through a read-only connection when it is a file in rollback-journal
 * mode with nothing beside it (a checkpoint's copy restored: store/sqlite-read-only.ts
 * openRollbackReadOnly), so its bytes stay as they were; false, copying nothing, for any other.
 */
function copyReadOnly(io: CliIo, state: string, tmp: string, out: string): boolean {
  const driver = sqliteDriver();
  let db: Database.Database | undefined;
  try {
    db = openRollbackReadOnly(driver, state, ATTEMPT_MS);
    if (db === undefined) return false;
    for (const note of sqliteStateNotes(state)) io.stderr(`rollout-budget: note: ${note}\n`);
    checkStateKind(db, state);
    vacuumInto(db, tmp, out);
    return true;
  } catch (error) {
    if (error instanceof RolloutBudgetError) throw error;
    throw cannotOpen(state, error);
  } finally {
    db?.close();
  }
}

/**
 * The prompts (those observed, as `inspect` counts them: not those only planned) and last step
 * a copy holds, read from the copy (read-only: a copy in rollback-journal mode gets no file
 * beside it).
 */
function copySummary(path: string): { prompts: number; last_step: number | null } {
  const driver = sqliteDriver();
  const db = new driver.Database(path, { readonly: true, fileMustExist: true, ...driver.options });
  try {
    const prompts = db.prepare('SELECT count(*) FROM prompts WHERE rollouts > 0').pluck().get() as number;
    return { prompts, last_step: lastStepReader(db)() };
  } finally {
    db.close();
  }
}
