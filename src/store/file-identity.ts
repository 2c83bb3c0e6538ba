import { RolloutBudgetError } from '../errors.js';
import { statIfThere } from '../io/paths.js';
import { networkStateNote } from './network-fs.js';

/** A file's device and inode: which file a path named when a state was opened. */
export interface FileIdentity {
  readonly dev: number;
  readonly ino: number;
}

/** The identity of the file at `path`, or undefined when nothing is there. O(1): one stat. */
export function fileIdentity(path: string): FileIdentity | undefined {
  const s = statIfThere(path);
  return s === undefined ? undefined : { dev: s.dev, ino: s.ino };
}

/**
 * Throws STATE_ERROR unless the file at `path` is still `opened` (not removed, and no other file
 * moved there). SQLite goes on writing a removed file's inode, whose data is gone when the last
 * connection closes, while a connection opened later (a planning thread's, the next command's)
 * opens or creates the file now at the path: two states, one of them lost.
 */
export function checkSameFile(path: string, opened: FileIdentity): void {
  const now = fileIdentity(path);
  if (now !== undefined && now.dev === opened.dev && now.ino === opened.ino) return;
  throw new RolloutBudgetError(
    'STATE_ERROR',
    `${path}: the state file was ${now === undefined ? 'removed' : 'replaced by another file'} after this process opened it; nothing was read or applied. ` +
      'Restart the command or the service to open the file now at that path',
  );
}

/**
 * A note when the SQLite state at `path` has more than one name (hard links: a snapshot of its
 * folder made with `cp -al`, as rsnapshot does), else undefined. SQLite names its `-wal` and
 * `-shm` after the path, so a writer through each name keeps its own: neither sees the other's
 * locks or log, and committed observes are lost without an error (sqlite.org/howtocorrupt.html
 * §2.3; 2,800 rollouts answered applied, 1,600 in the state). O(1): one stat.
 */
export function linkedStateNote(path: string): string | undefined {
  if (path === ':memory:') return undefined;
  const links = statIfThere(path)?.nlink ?? 1;
  if (links < 2) return undefined;
  return `${path} has ${links} hard links (other names for the same file, e.g. a snapshot of its folder made with cp -al): SQLite keeps its -wal and -shm beside each name, so writers through two names lose each other's updates without an error; write the state through one name only, and take copies with backup`;
}

/** What an operator should know about the SQLite state file at `path` (SqliteStore.notes). */
export function sqliteStateNotes(path: string): string[] {
  return [networkStateNote(path), linkedStateNote(path)].filter((note) => note !== undefined);
}
