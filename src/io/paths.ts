import { existsSync, mkdirSync, statSync, type Stats } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { RolloutBudgetError } from '../errors.js';

/** The package's root (the folder holding package.json), from src/ or dist/src/ alike. */
export function packageRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, 'package.json'))) {
    const up = dirname(dir);
    if (up === dir) throw new Error('package.json not found above the module');
    dir = up;
  }
  return dir;
}

/** A file shipped in fixtures/. */
export function fixturePath(...parts: string[]): string {
  return join(packageRoot(), 'fixtures', ...parts);
}

/**
 * `mkdir -p dir`, one folder at a time. Node 20's `mkdirSync(dir, { recursive: true })` never
 * returns where a folder that is there refuses a new entry with ENOENT (`/proc/self/x`: replay
 * --out hung at 100% CPU). Throws the first failure's errno error (ENOTDIR: a file on the way).
 */
export function makeFolders(dir: string): void {
  const missing: string[] = [];
  for (let at = resolve(dir); statSync(at, { throwIfNoEntry: false }) === undefined; ) {
    missing.push(at);
    const up = dirname(at);
    if (up === at) break;
    at = up;
  }
  for (const folder of missing.reverse()) mkdirSync(folder);
}

/**
 * `statSync(path)`, or undefined when nothing is there: no entry (ENOENT), or a file where a
 * folder of the path should be (ENOTDIR: `--state afile/x.db` crashed with a stack trace).
 * A path that cannot be followed (a folder on its way this user cannot search, a loop of
 * symbolic links, a name too long) throws IO_ERROR naming it and why (unreachable): it was an
 * internal error with a stack trace.
 */
export function statIfThere(path: string): Stats | undefined {
  try {
    return statSync(path, { throwIfNoEntry: false });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOTDIR') return undefined;
    throw unreachable(path, error);
  }
}

/** The IO_ERROR of a path stat(2) cannot follow: `<path>: cannot reach it (EACCES: ...)`. */
export function unreachable(path: string, error: unknown): Error {
  const code = (error as NodeJS.ErrnoException).code;
  if (code === undefined) return error instanceof Error ? error : new Error(String(error));
  const why: Readonly<Record<string, string>> = {
    EACCES: `this user (uid ${process.getuid?.() ?? '?'}) cannot search a folder on its way`,
    ELOOP: 'a loop of symbolic links',
    ENAMETOOLONG: 'a name in it is longer than the file system takes',
  };
  return new RolloutBudgetError('IO_ERROR', `${path}: cannot reach it (${code}${why[code] === undefined ? '' : `: ${why[code]}`})`);
}
