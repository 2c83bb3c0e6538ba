import { statfsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { RolloutBudgetError } from '../errors.js';
import { shellWord } from '../io/shell-word.js';
import { statIfThere } from '../io/paths.js';
import { isPostgresUrl } from './url.js';

/**
 * A state that cannot be used for a reason outside the program (PostgreSQL stopped, restarted,
 * out of connections, a network cut; a SQLite file on a full disk, read-only, damaged), told
 * apart from a bug: the request is answered 503 STATE_ERROR (a CLI command exits 2) with one
 * line saying so, not 500 INTERNAL with a stack trace. Nothing half-done is left: a
 * transaction the connection lost is rolled back by the server, one SQLite could not finish is
 * rolled back by SQLite, and a re-sent observe applies once (its keys), should its COMMIT have
 * landed before the answer was lost.
 */

/** Node's socket errors (`connect ECONNREFUSED ...`) that mean the server is not there. */
const SOCKET_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN', 'EPIPE']);

/**
 * PostgreSQL's SQLSTATEs for the same (appendix A of its manual): class 08, connection
 * exception; 57P01–57P03, the server shutting down or starting; 53300, too many connections.
 */
const SQLSTATES = new Set(['57P01', '57P02', '57P03', '53300']);

/** node-postgres's own messages for a connection it lost or could not make in time. */
const PG_MESSAGES = /^(Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error and is not queryable)/;

/** The STATE_ERROR that `error` means when it says the state database cannot be reached; else undefined. */
export function stateUnreachable(error: unknown): RolloutBudgetError | undefined {
  if (!(error instanceof Error) || error instanceof RolloutBudgetError) return undefined;
  const code = (error as { code?: unknown }).code;
  const lost = (typeof code === 'string' && (SOCKET_CODES.has(code) || SQLSTATES.has(code) || (code.length === 5 && code.startsWith('08'))))
    || PG_MESSAGES.test(error.message);
  if (!lost) return undefined;
  const detail = error.message || (typeof code === 'string' ? code : error.name);
  const unreachable = new RolloutBudgetError('STATE_ERROR', `the state database cannot be reached (${detail}); retry when it is back (re-sending an observe is safe: it is applied once)`);
  unreachable.cause = error;
  unreachable.retryable = true;
  return unreachable;
}

/**
 * The STATE_ERROR of PostgreSQL's insufficient_privilege (42501): the role may not read or
 * write a table of the state (a teammate's read-only role that observes, a grant that missed
 * a table). Before, it surfaced as an internal error with a stack trace, exit 1.
 */
export function permissionDenied(error: unknown): RolloutBudgetError | undefined {
  if (!(error instanceof Error) || error instanceof RolloutBudgetError || (error as { code?: unknown }).code !== '42501') return undefined;
  const denied = new RolloutBudgetError(
    'STATE_ERROR',
    `this database role lacks a right on the state (${error.message}); nothing was written. Reading the state takes USAGE on its schema and SELECT on its tables; observing, and planning prompts that bring a group or hint, INSERT, UPDATE and DELETE too (docs/service.md, "Shared state on PostgreSQL")`,
  );
  denied.cause = error;
  return denied;
}

/** What a key of each of the state's indexes is, for keyTooLong's message. */
const INDEXED: Readonly<Record<string, string>> = { prompts_pkey: 'a prompt id', seen_pkey: 'a rollout_id', pooled_pkey: 'a group' };

/**
 * BAD_INPUT for PostgreSQL's refusal of a key its btree index cannot hold (SQLSTATE 54000,
 * "index row size 3016 exceeds btree version 4 maximum 2704 for index "seen_pkey""): an id,
 * rollout_id or group the program takes (up to 65,536 characters) but PostgreSQL cannot index
 * beyond about 2,700 bytes. Before, an internal error, exit 1. Nothing was written: the
 * transaction is rolled back.
 */
export function keyTooLong(error: unknown): RolloutBudgetError | undefined {
  if (!(error instanceof Error) || error instanceof RolloutBudgetError || (error as { code?: unknown }).code !== '54000') return undefined;
  if (!/index row/.test(error.message)) return undefined; // another limit (a statement too large, ...): as it is
  // Its two messages (English servers): the btree's limit, and, for an entry over a page's
  // 8,191 bytes after compression, the index tuple's ("index row requires 12016 bytes, maximum
  // size is 8191"), which names no index. Any other 54000 (another limit) is named generically.
  const m = /^index row size (\d+) exceeds .*maximum (\d+) for index "(?:[^"]*\.)?([^"]+)"/.exec(error.message)
    ?? /^index row requires (\d+) bytes, maximum size is (\d+)()/.exec(error.message);
  const what = m === null ? 'an id, rollout_id or group' : (INDEXED[m[3]!] ?? 'an id, rollout_id or group');
  const size = m === null ? 'that' : `of about ${m[1]} bytes`;
  const limit = m === null ? '' : ` (${m[2]} bytes)`;
  const long = new RolloutBudgetError(
    'BAD_INPUT',
    `${what} ${size} is longer than a PostgreSQL state can index${limit}; PostgreSQL: ${error.message}; nothing was written. On PostgreSQL keep ids, rollout ids and groups under about 2,700 bytes of UTF-8 (a hash of a long prompt text, as stable_prompt_id makes)`,
  );
  long.cause = error;
  return long;
}

/** Throws `error` as its STATE_ERROR when it says the state database cannot be reached or the role lacks a right, else as it is. */
export function rethrowUnreachable(error: unknown): never {
  throw stateUnreachable(error) ?? permissionDenied(error) ?? keyTooLong(error) ?? error;
}

/**
 * The error of a state that could not be opened: `where: cannot open the state database (the
 * server's or SQLite's own words)`, or the RolloutBudgetError itself when it is one of the
 * program's (a lock wait that ran out) and not one of the above wrapping a driver's error.
 */
export function cannotOpen(where: string, error: unknown): RolloutBudgetError {
  const cause = error instanceof RolloutBudgetError && error.cause instanceof Error ? error.cause : error;
  if (cause instanceof RolloutBudgetError) return cause;
  const message = cause instanceof Error ? cause.message : String(cause);
  // node-postgres's words when the server asks a password (SCRAM) and none was given.
  const why = /client password must be a string/.test(message)
    ? `${message}: the server wants a password for this role and none was given: put it in the URL (postgres://user:password@host/db) or in PGPASSWORD`
    : /unable to open database file/.test(message) && statIfThere(where)?.isDirectory() === true
      ? `${message}: it is a folder; give the path of a state file, e.g. ${join(where, 'rollout-budget.db')}`
      : /unable to open database file|directory does not exist/.test(message) && dirname(where) !== where
        ? folderMissing(message, dirname(where))
        : /disk I\/O error|database or disk is full/.test(message) && diskFull(where)
          ? `${message}: the disk holding it is full (no bytes free): free space there; the state is as it was`
          : message;
  const failed = new RolloutBudgetError('STATE_ERROR', `${where}: cannot open the state database (${why})`);
  // A database down, restarting or out of connections may be back shortly: retryable, as a
  // request on an open store says then (a service's planning thread opens its own store on its
  // first plan, and its 503 had no Retry-After, so clients gave up on a restart they ride out).
  if (stateUnreachable(cause) !== undefined) failed.retryable = true;
  return failed;
}

/** Whether the file system holding the SQLite state at `path` (or its folder) has no byte free for this user. */
function diskFull(path: string): boolean {
  if (isPostgresUrl(path)) return false;
  for (const at of [path, dirname(path)]) {
    try {
      return statfsSync(at).bavail === 0;
    } catch {
      // not there: its folder
    }
  }
  return false;
}

/**
 * Why the state's `folder` cannot hold it: a file on the way (`afile` of `afile/sub/x.db`), or no
 * folder (and how to make it); SQLite's words alone said neither. `message` as it is when the
 * folder is there.
 */
function folderMissing(message: string, folder: string): string {
  let at = folder;
  while (statIfThere(at) === undefined && dirname(at) !== at) at = dirname(at);
  const kind = statIfThere(at);
  if (kind !== undefined && !kind.isDirectory()) return `${message}: ${at} is a file, not a folder`;
  if (at === folder) return message;
  return `${message}: there is no folder ${folder}; make it first (mkdir -p ${shellWord(folder)})`;
}

/** What each SQLite primary result code (https://sqlite.org/rescode.html) says of the state file. */
const SQLITE_FAILURES: Readonly<Record<string, string>> = {
  SQLITE_FULL: 'the disk holding the state is full',
  SQLITE_IOERR: 'the state file cannot be read or written',
  SQLITE_READONLY: 'the state file cannot be written (check the permissions of it and of its folder, where SQLite also writes its -wal and -shm files)',
  SQLITE_PERM: 'the state file cannot be written (access denied)',
  SQLITE_CANTOPEN: 'the state file cannot be opened',
  SQLITE_CORRUPT: 'the state file is damaged',
  SQLITE_NOTADB: 'the state file is not a SQLite database',
};

const DAMAGED = 'the state file holds a value that is not a number, which no observe writes: was it changed by another program? Restore it from a backup';

/**
 * The STATE_ERROR that a SQLite error on the state at `path` means when it is one of the
 * failures above (an extended code such as SQLITE_IOERR_WRITE included); else undefined.
 * SQLite has rolled back the transaction it could not finish, so the state is as it was.
 */
export function sqliteUnavailable(error: unknown, path: string): RolloutBudgetError | undefined {
  if (!(error instanceof Error) || error instanceof RolloutBudgetError) return undefined;
  const code = (error as { code?: unknown }).code;
  if (typeof code !== 'string') return undefined;
  // A NaN written back from a stored value that is not a number (the file edited by another program): SQLite has NULL for it.
  const what = code === 'SQLITE_CONSTRAINT_NOTNULL' ? DAMAGED : SQLITE_FAILURES[/^SQLITE_[A-Z]+/.exec(code)?.[0] ?? ''];
  if (what === undefined) return undefined;
  const failure = new RolloutBudgetError('STATE_ERROR', `${path}: ${what} (${code}: ${error.message}); the state is as it was`);
  failure.cause = error;
  return failure;
}
