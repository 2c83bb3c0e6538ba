import { lstatSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { statIfThere } from '../io/paths.js';

/**
 * Removes the temp files a killed writer of `target` left beside it (`<target>.tmp-<pid>`, and a
 * SQLite copy's `-journal`): this user's plain files, of processes no longer running here,
 * untouched for 10 minutes. A `kill -9` during a plan or a backup left them for good (a
 * 10⁶-prompt plan's is 100 to 260 MB). A process still running (another writer of the same
 * file) keeps its own. Best effort: what cannot be removed stays.
 */
export function removeStaleTemps(target: string): void {
  removeStale(dirname(target), `${basename(target)}.tmp-`, /^(\d+)(?:-journal)?$/, false);
}

/**
 * Removes the copies of stdin or a pipe (`<prefix><pid>-XXXXXX/`, cli/io.ts spool) in the temp
 * folder that a killed process left: a `kill -9` during `observe --results -` left the whole
 * copy for good (46 MB a kill at 600,000 rollouts). As removeStaleTemps, for this user's
 * folders, untouched (the folder and its copy) for 10 minutes.
 */
export function removeStaleSpools(prefix: string): void {
  removeStale(tmpdir(), prefix, /^(\d+)-[^/]+$/, true);
}

/** How long a temp file must have been left untouched before it is taken for a dead writer's. */
const STALE_MS = 10 * 60_000;

/**
 * The entries of `dir` named `prefix` + a rest whose `pid` (pattern's first group) is of no
 * process running here, this user's plain files (or folders: `folder`), untouched for STALE_MS:
 * removed. A writer on another host sharing the folder (NFS), whose process this host cannot
 * see, keeps writing its own, so it is not taken.
 */
function removeStale(dir: string, prefix: string, pattern: RegExp, folder: boolean): void {
  let names: string[];
  try {
    names = readdirSync(dir).filter((n) => n.startsWith(prefix));
  } catch {
    return;
  }
  const now = Date.now();
  for (const name of names) {
    const pid = Number(pattern.exec(name.slice(prefix.length))?.[1]);
    if (!Number.isSafeInteger(pid) || pid <= 0 || pid === process.pid || isRunning(pid)) continue;
    try {
      const path = join(dir, name);
      const stat = lstatSync(path);
      if (!(folder ? stat.isDirectory() : stat.isFile()) || (process.getuid !== undefined && stat.uid !== process.getuid())) continue;
      const copy = folder ? statIfThere(join(path, 'input.jsonl')) : undefined;
      if (now - Math.max(stat.mtimeMs, copy?.mtimeMs ?? 0) < STALE_MS) continue;
      rmSync(path, { recursive: folder, force: true });
    } catch {
      // best effort: what cannot be removed stays, and the command goes on
    }
  }
}

function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM'; // there, another user's
  }
}
