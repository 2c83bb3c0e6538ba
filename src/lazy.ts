import { createRequire } from 'node:module';

/**
 * A CommonJS dependency loaded on first use, synchronously. Large libraries (jStat,
 * javascript-lp-solver, better-sqlite3) take 20–50 ms each to load; a command that never
 * calls them (`--help`, most commands) should not pay for them. O(1) after the first call.
 */
export function lazyRequire<T>(name: string): () => T {
  let loaded: T | undefined;
  return () => (loaded ??= createRequire(import.meta.url)(name) as T);
}
