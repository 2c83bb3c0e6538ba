import { spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { RolloutBudgetError } from '../src/index.js';
import { driverFor, loadable, sqliteDriver } from '../src/store/sqlite-driver.js';
import { tempDir } from './temp.js';

const MODULES = join(dirname(fileURLToPath(import.meta.url)), '..', 'node_modules');

/** The error `loadable` throws for a driver, or undefined when it loads. */
function loadError(d: ReturnType<typeof driverFor>, index: string): RolloutBudgetError | undefined {
  try {
    loadable(d, index);
    return undefined;
  } catch (error) {
    expect(error).toBeInstanceOf(RolloutBudgetError);
    return error as RolloutBudgetError;
  }
}

/** Opens an in-memory database with a driver and runs one query through the native addon. */
const roundTrip = (d: ReturnType<typeof driverFor>) => {
  const db = new d.Database(':memory:', d.options);
  try {
    return db.prepare('SELECT 40 + 2 AS v').get();
  } finally {
    db.close();
  }
};

describe('better-sqlite3 driver (store/sqlite-driver.ts)', () => {
  it('names the installed addon by path when it is there, and that path opens a database', () => {
    const d = sqliteDriver();
    expect(d.options.nativeBinding).toMatch(/better-sqlite3[/\\]build[/\\]Release[/\\]better_sqlite3\.node$/);
    expect(roundTrip(d)).toEqual({ v: 42 });
  });

  it('an install without build/Release/better_sqlite3.node falls back to the package, which finds its addon itself', () => {
    const d = driverFor(join('/nonexistent', 'build', 'Release', 'better_sqlite3.node'));
    expect(d.options).toEqual({});
    expect(roundTrip(d)).toEqual({ v: 42 });
  });

  it('an install whose native module was never built (npm ran no install scripts) says so and how to build it, not the paths it tried', () => {
    // better-sqlite3 as npm leaves it with ignore-scripts: its JavaScript, no build/ folder.
    const project = tempDir('rb-no-addon-');
    const pkg = join(project, 'node_modules', 'better-sqlite3');
    mkdirSync(pkg, { recursive: true });
    cpSync(join(MODULES, 'better-sqlite3', 'package.json'), join(pkg, 'package.json'));
    cpSync(join(MODULES, 'better-sqlite3', 'lib'), join(pkg, 'lib'), { recursive: true });
    for (const dep of ['bindings', 'file-uri-to-path']) symlinkSync(join(MODULES, dep), join(project, 'node_modules', dep), 'dir');
    const index = join(pkg, 'lib', 'index.js');
    const Database = createRequire(index)(index) as ReturnType<typeof driverFor>['Database'];
    expect(() => new Database(':memory:')).toThrow(/^Could not locate the bindings file/);

    const error = loadError({ Database, options: {} }, index)!;
    expect(error.code).toBe('STATE_ERROR');
    expect(error.message).toBe(
      `cannot load SQLite: better-sqlite3's native module (${pkg}) was never built: npm ran no install script for it. Build it for this Node (${process.version}, ${process.platform}-${process.arch}): ` +
        `cd ${project} && npm rebuild better-sqlite3 --ignore-scripts=false (it downloads a prebuilt binary, or compiles SQLite where it cannot: 1 to 2 min; ` +
        'npm runs no install script where ignore-scripts is set or its allowScripts leaves better-sqlite3 out)',
    );
  });

  it('a native module that is not one for this machine names dlopen\'s reason', () => {
    const dir = tempDir('rb-bad-addon-');
    const addon = join(dir, 'better_sqlite3.node');
    writeFileSync(addon, 'not a shared library\n'.repeat(200));
    const error = loadError(driverFor(addon), join(MODULES, 'better-sqlite3', 'lib', 'index.js'))!;
    expect(error.message).toMatch(/^cannot load SQLite: better-sqlite3's native module \(.*\) cannot be loaded \(.*invalid ELF header\)\. Build it for this Node/);
    expect(error.message).toContain(`cd ${dirname(MODULES)} && npm rebuild better-sqlite3 --ignore-scripts=false`);
  });

  // A module built for another Node (after a switch of Node versions), as Node's own test of the
  // message builds one (its addons test of a module built with NODE_MODULE_VERSION 42): a shared object
  // that registers itself with that version, compiled by the system's C compiler.
  const cc = spawnSync('cc', ['--version']).status === 0;
  it.skipIf(!cc)('a native module built for another Node names both ABI versions (needs a C compiler)', () => {
    const dir = tempDir('rb-abi-addon-');
    writeFileSync(join(dir, 'addon.c'), [
      '/* node_module as node.h declares it (node_module_register: the registration of a NAN-era addon). */',
      'struct node_module { int nm_version; unsigned int nm_flags; void* nm_dso_handle; const char* nm_filename;',
      '  void* nm_register_func; void* nm_context_register_func; const char* nm_modname; void* nm_priv; struct node_module* nm_link; };',
      'extern void node_module_register(void*);',
      'static struct node_module m = { 42, 0, 0, "addon.c", 0, 0, "better_sqlite3", 0, 0 };',
      'static void __attribute__((constructor)) init(void) { node_module_register(&m); }',
      '',
    ].join('\n'));
    const addon = join(dir, 'better_sqlite3.node');
    const built = spawnSync('cc', ['-shared', '-fPIC', '-o', addon, join(dir, 'addon.c')], { encoding: 'utf8' });
    expect(built.status, built.stderr).toBe(0);
    const error = loadError(driverFor(addon), join(MODULES, 'better-sqlite3', 'lib', 'index.js'))!;
    expect(error.message).toContain(`was built for another Node (NODE_MODULE_VERSION 42; this one needs ${process.versions.modules}). Build it for this Node (${process.version}`);
  });

  it('the installed driver loads (the check sqliteDriver makes)', () => {
    expect(loadError(sqliteDriver(), join(MODULES, 'better-sqlite3', 'lib', 'index.js'))).toBeUndefined();
  });
});
