import { accessSync, closeSync, constants, openSync, readFileSync, readSync, realpathSync, statSync, type Stats } from 'node:fs';
import { dirname, resolve } from 'node:path';
import type Database from 'better-sqlite3';
import { RolloutBudgetError } from '../errors.js';
import type { SqliteDriver } from './sqlite-driver.js';
import { cannotOpen } from './unavailable.js';
import { statIfThere } from '../io/paths.js';

/**
 * A SQLite state file this process may read but not write: a teammate's `inspect` of the
 * trainer's state, a state on a read-only mount or in a folder only its owner may write.
 *
 * SQLite in WAL mode makes `-wal` and `-shm` files beside the state to read it, read-only
 * connections too, and only a connection that can write the state removes them when it
 * closes. Made by a user who cannot write the state, they stay, owned by that user, and the
 * owner's next `observe` then fails (SQLITE_READONLY: the owner cannot write that `-shm`)
 * until someone removes them. So such a state is never opened the usual way: it is read from a
 * copy in memory (nothing is made beside it), or, while its owner has it open (its `-wal` and
 * `-shm` are there), through those files read-only. Either way any write fails, naming why.
 */

/** Why this process cannot write the SQLite state file at `path`, or undefined when it can (or the file is not there). */
export function unwritableReason(path: string): string | undefined {
  if (path === ':memory:') return undefined;
  const file = statIfThere(path);
  if (file === undefined || !file.isFile()) return undefined;
  const denied = writeDenied(path);
  if (denied === 'EROFS') return 'it is on a read-only file system';
  if (denied !== undefined) return `this user (uid ${process.getuid?.() ?? '?'}) cannot write it (owner uid ${file.uid}, mode ${(file.mode & 0o777).toString(8).padStart(4, '0')})`;
  // SQLite follows a symlink: its -wal and -shm go beside the file it leads to.
  const real = realpathSync(path);
  const folder = dirname(real);
  if (writeDenied(folder) !== undefined && statIfThere(`${real}-shm`) === undefined) {
    return `this user cannot write its folder ${folder}, where SQLite makes the state's -wal and -shm files`;
  }
  return undefined;
}

/**
 * Why this process cannot make a new SQLite state file at `path`, or undefined when it can (or
 * the file is there, or its folder is not: SQLite says so itself). SQLite's own words for it,
 * "unable to open database file", name neither the folder nor the cause.
 */
function uncreatableReason(path: string): string | undefined {
  if (path === ':memory:' || path === '' || statIfThere(path) !== undefined) return undefined;
  const folder = dirname(resolve(path));
  if (statIfThere(folder)?.isDirectory() !== true) return undefined;
  const denied = writeDenied(folder);
  if (denied === undefined) return undefined;
  const why = denied === 'EROFS' ? 'is on a read-only file system' : `cannot be written by this user (uid ${process.getuid?.() ?? '?'})`;
  return `there is no state file there yet, and its folder ${folder} ${why}, so none can be made: give the state a path in a folder this user can write`;
}

/** Throws STATE_ERROR naming the folder when there is no state file at `path` and none can be made (uncreatableReason). */
export function requireCreatable(path: string): void {
  const reason = uncreatableReason(path);
  if (reason !== undefined) throw cannotOpen(path, new Error(reason));
}

/** The code of access(2) refusing to let this process write `path` (EACCES, EROFS, ...), or undefined when it may. */
function writeDenied(path: string): string | undefined {
  try {
    accessSync(path, constants.W_OK);
    return undefined;
  } catch (error) {
    return String((error as NodeJS.ErrnoException).code ?? 'EACCES');
  }
}

/** Tries at reading a file whose bytes change meanwhile (its owner checkpointing it) before giving up. */
const COPY_TRIES = 5;
/** The largest state read from a copy in memory: Node reads at most 2 GiB a file, and SQLite takes no larger image. */
const COPY_MAX_BYTES = 2 ** 31 - 1;

/**
 * Opens the state at `path` without writing anything beside it (see above). With no WAL content
 * the file holds the whole state: it is copied into memory (its header's WAL mark set to the
 * rollback journal's, as the in-memory database cannot use a WAL) while its size and mtime stay
 * the same and no WAL appears, so the copy is one moment's state. With a `-wal` and `-shm` there
 * (a writer has it open), SQLite reads it through them read-only. A `-wal` with content but no
 * `-shm` (a writer that crashed) only a connection that can write may replay: refused.
 */
export function openReadOnly(driver: SqliteDriver, path: string, reason: string): Database.Database {
  const real = realpathSync(path); // where SQLite looks for the -wal and -shm (a symlink followed)
  const wal = statIfThere(`${real}-wal`);
  const shm = statIfThere(`${real}-shm`);
  if (wal !== undefined && shm !== undefined) return new driver.Database(path, { readonly: true, fileMustExist: true, ...driver.options });
  if (wal !== undefined && wal.size > 0) {
    throw new RolloutBudgetError('STATE_ERROR', `${path}: ${reason}, and its write-ahead log (${real}-wal) holds changes only a process that can write the state may apply: run a command on it as its owner first`);
  }
  const size = statSync(real).size;
  if (size > COPY_MAX_BYTES) {
    throw new RolloutBudgetError(
      'STATE_ERROR',
      `${path}: ${reason}, and at ${(size / 2 ** 30).toFixed(1)} GiB it is too large to read from a copy in memory (at most 2 GiB): ` +
        'run the command as its owner, or while its owner has it open (it is then read through the owner\'s -wal and -shm)',
    );
  }
  for (let attempt = 0; attempt < COPY_TRIES; attempt++) {
    const before = statSync(real);
    const bytes = readFileSync(real);
    if (!sameFile(before, statSync(real)) || statIfThere(`${real}-wal`)?.size) continue;
    // Bytes 18 and 19 of the header: the file format's write and read versions, 2 for WAL, 1 for a rollback journal.
    if (bytes.length >= 20 && bytes[18] === 2 && bytes[19] === 2) bytes[18] = bytes[19] = 1;
    return new driver.Database(bytes, driver.options);
  }
  throw new RolloutBudgetError('STATE_ERROR', `${path}: ${reason}, and it kept changing while it was read (${COPY_TRIES} tries); retry`);
}

function sameFile(a: Stats, b: Stats): boolean {
  return a.ino === b.ino && a.size === b.size && a.mtimeMs === b.mtimeMs;
}

/** What both errors below advise. */
const ADVICE = 'Run it as the state\'s owner, or give this user write access to the file and its folder';

/** The STATE_ERROR of a write to a state opened read-only: `reason` is `path: why`. */
export function readOnlyError(reason: string): RolloutBudgetError {
  return new RolloutBudgetError('STATE_ERROR', `${reason}, so it was opened read-only and this command cannot write it; nothing was written. ${ADVICE}`);
}

/**
 * Throws STATE_ERROR, before anything opens the SQLite state at `path`, when this user cannot
 * write it: for commands that always write it (`serve`, `execute`, `loop`), which should
 * fail at once, not after a generation. `writes` says what they write (`serve writes each observe into it`).
 */
export function requireWritable(path: string, writes: string): void {
  requireCreatable(path);
  const reason = unwritableReason(path);
  if (reason === undefined) return;
  throw new RolloutBudgetError('STATE_ERROR', `${path}: ${reason}; ${writes}, so it must be writable, and nothing was opened. ${ADVICE}`);
}

/**
 * Opens the SQLite state at `path` read-only when it is in rollback-journal mode with no
 * `-wal` or `-journal` beside it (a copy `backup` made: a checkpoint's state), else undefined.
 * Such a file is read under a shared lock and nothing is made beside it or changed in it: the
 * usual open would switch it to WAL, and upgrade an older format, changing a checkpoint's bytes
 * when a run is restored from it. The caller checks its kind (state-kind.ts) and closes it.
 */
export function openRollbackReadOnly(driver: SqliteDriver, path: string, timeoutMs: number): Database.Database | undefined {
  if (path === ':memory:') return undefined;
  const real = realpathSync(path);
  if (statIfThere(`${real}-wal`) !== undefined || statIfThere(`${real}-journal`) !== undefined) return undefined;
  const head = Buffer.alloc(20);
  const fd = openSync(real, 'r');
  try {
    if (readSync(fd, head, 0, 20, 0) < 20) return undefined;
  } finally {
    closeSync(fd);
  }
  // Bytes 18 and 19 of the header: the file format's write and read versions, 1 for a rollback journal.
  if (head[18] !== 1 || head[19] !== 1) return undefined;
  return new driver.Database(path, { readonly: true, fileMustExist: true, timeout: timeoutMs, ...driver.options });
}
