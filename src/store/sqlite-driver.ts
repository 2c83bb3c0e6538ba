import type Database from 'better-sqlite3';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { lazyRequire } from '../lazy.js';

/** better-sqlite3, loaded on first use: the CLI's bundle carries its JavaScript (scripts/bundle-cli.ts). */
const bundled = lazyRequire<typeof Database>('better-sqlite3');

/** The same package as installed in node_modules (never bundled), which finds its native addon itself. */
const installed = lazyRequire<typeof Database>('better-sqlite3/lib/index.js');

/** The Database class and what its constructor needs to load the native addon. */
export interface SqliteDriver {
  readonly Database: typeof Database;
  readonly options: { readonly nativeBinding?: string };
}

let driver: SqliteDriver | undefined;

/**
 * better-sqlite3 with its native addon named by path (build/Release, where its install puts
 * it): that spares the `bindings` package's search of a dozen paths (~1.5 ms of a start), and
 * lets the bundle's copy of the JavaScript load the addon (that copy cannot find it itself).
 * An install without that file gets the package from node_modules, which finds its addon as
 * always. Loaded on first use; O(1) after.
 */
export function sqliteDriver(): SqliteDriver {
  if (driver !== undefined) return driver;
  const require = createRequire(import.meta.url);
  driver = driverFor(join(dirname(dirname(require.resolve('better-sqlite3/lib/index.js'))), 'build', 'Release', 'better_sqlite3.node'));
  return driver;
}

/** The driver given where the native addon should be: named by path if it is there, else the installed package's own search. */
export function driverFor(addon: string): SqliteDriver {
  return existsSync(addon) ? { Database: bundled(), options: { nativeBinding: addon } } : { Database: installed(), options: {} };
}

/** The package as installed, for tools that open a database without these options (SqliteStore.driver). */
export const installedSqlite: () => typeof Database = installed;
