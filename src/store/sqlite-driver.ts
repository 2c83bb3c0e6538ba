import type Database from 'better-sqlite3';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { RolloutBudgetError } from '../errors.js';
import { shellWord } from '../io/shell-word.js';
import { lazyRequire } from '../lazy.js';
import { keeping, keepingAll } from './sqlite-kept.js';

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
 * always. Loaded on first use, and checked then by opening an in-memory database (loadable);
 * O(1) after.
 */
export function sqliteDriver(): SqliteDriver {
  if (driver !== undefined) return driver;
  const index = createRequire(import.meta.url).resolve('better-sqlite3/lib/index.js');
  driver = loadable(driverFor(join(dirname(dirname(index)), 'build', 'Release', 'better_sqlite3.node')), index);
  return driver;
}

/**
 * The driver, once it has opened and closed an in-memory database; else a STATE_ERROR that
 * says why its native addon did not load and how to build it, in place of the `bindings`
 * package's list of a dozen paths tried or dlopen's message. The addon is missing where npm ran
 * no install scripts (`ignore-scripts`, or an npm whose `allowScripts` leaves better-sqlite3
 * out), and built for another Node after a switch of Node versions. `index`: the package's
 * lib/index.js, whose node_modules folder's parent is where `npm rebuild` runs.
 */
export function loadable(found: SqliteDriver, index: string): SqliteDriver {
  try {
    new found.Database(':memory:', found.options).close();
    return found;
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    const abi = /NODE_MODULE_VERSION (\d+)\. This version of Node\.js requires\s+NODE_MODULE_VERSION (\d+)/.exec(reason);
    const what = /^Could not locate the bindings file/.test(reason)
      ? 'was never built: npm ran no install script for it'
      : abi !== null
        ? `was built for another Node (NODE_MODULE_VERSION ${abi[1]}; this one needs ${abi[2]})`
        : `cannot be loaded (${reason.split('\n')[0]})`;
    const pkg = dirname(dirname(index));
    const root = dirname(pkg).endsWith('node_modules') ? dirname(dirname(pkg)) : pkg;
    throw new RolloutBudgetError(
      'STATE_ERROR',
      `cannot load SQLite: better-sqlite3's native module (${pkg}) ${what}. Build it for this Node (${process.version}, ${process.platform}-${process.arch}): ` +
        `cd ${shellWord(root)} && npm rebuild better-sqlite3 --ignore-scripts=false (it downloads a prebuilt binary, or compiles SQLite where it cannot: 1 to 2 min; ` +
        'npm runs no install script where ignore-scripts is set or its allowScripts leaves better-sqlite3 out)',
    );
  }
}

/**
 * The driver given where the native addon should be: named by path if it is there, else the
 * installed package's own search. Its Database keeps its connections and statements until the
 * process ends (store/sqlite-kept.ts: Node 24 aborts when it collects one).
 */
export function driverFor(addon: string): SqliteDriver {
  return existsSync(addon) ? { Database: keeping(bundled()), options: { nativeBinding: addon } } : { Database: keeping(installed()), options: {} };
}

/**
 * The package as installed, for tools that open a database without these options
 * (SqliteStore.driver): its connections, statements and iterators kept until the process ends,
 * pragma() and iterate() allowed (store/sqlite-kept.ts keepingAll).
 */
export const installedSqlite = (): typeof Database => keepingAll(installed());
