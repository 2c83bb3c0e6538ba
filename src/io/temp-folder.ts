import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { RolloutBudgetError } from '../errors.js';

/**
 * A new folder (`prefix` + random) in the system's temp folder, for `what` (a copy of stdin, a
 * replay's scratch file); or an IO_ERROR that names the temp folder, the variable that named
 * it, and what to do. On clusters TMPDIR often names a scratch folder not made yet, or one
 * this user cannot write; Node's own error (an internal error with a stack here) said neither.
 */
export function tempFolder(prefix: string, what: string): string {
  try {
    return mkdtempSync(join(tmpdir(), prefix));
  } catch (error) {
    throw new RolloutBudgetError('IO_ERROR', `cannot make a temporary folder for ${what} in ${where()}: ${reasonOf(error)}; set TMPDIR to a folder this user can write`);
  }
}

/** The IO_ERROR of a write into a file in the temp folder that failed (a full disk, a quota). */
export function tempWriteFailed(what: string, error: unknown): RolloutBudgetError {
  const code = (error as NodeJS.ErrnoException).code;
  const fix = code === 'ENOSPC' || code === 'EDQUOT' ? 'free space there, or set TMPDIR to a folder on a disk with room' : 'set TMPDIR to a folder this user can write';
  return new RolloutBudgetError('IO_ERROR', `cannot write ${what} in ${where()}: ${reasonOf(error)}; ${fix}`);
}

/** The temp folder, with the variable that named it (Node's os.tmpdir reads TMPDIR, TMP, TEMP). */
function where(): string {
  const name = ['TMPDIR', 'TMP', 'TEMP'].find((n) => (process.env[n] ?? '') !== '');
  return name === undefined ? tmpdir() : `${tmpdir()} ($${name})`;
}

function reasonOf(error: unknown): string {
  const e = error as NodeJS.ErrnoException;
  return e.code ?? (e instanceof Error ? e.message : String(e));
}
