import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** A test file's own folder, as temp-check.ts names it. */
const SKIPPED_FILE_DIR = /\.test\.ts-[\w]{6}$/;

const isEmptyDir = (path: string) => statSync(path).isDirectory() && readdirSync(path).length === 0;

/**
 * Vitest global setup: one temp folder for this run (`rb-test-run-*` in the system temp dir),
 * and TMPDIR pointed at it before the test workers start, so everything the tests and the
 * processes they start put in `os.tmpdir()` lands there. Each test file works in its own
 * subfolder and checks it is empty at the end (`temp-check.ts`); this teardown checks that
 * nothing else was left, fails the run (exit code 1) naming what was, and removes the folder.
 * Only this run's folder is looked at: other jobs on the machine may be running tests too.
 */
export default function setup(): () => void {
  const root = mkdtempSync(join(tmpdir(), 'rb-test-run-'));
  process.env.RB_TEST_TMP_ROOT = root;
  process.env.TMPDIR = root;
  // npm on Node ≥ 22 turns on Node's module compile cache (module.enableCompileCache), which
  // writes node-compile-cache/ into os.tmpdir() and keeps it: npm's own cache, not something a
  // test left. Off for the processes the tests start (Node 22.8 and later read this variable).
  process.env.NODE_DISABLE_COMPILE_CACHE = '1';
  return () => {
    // A test file whose tests were all skipped (no PostgreSQL, Python or Chromium here) never
    // runs its afterAll, so its own folder (temp-check.ts) stays behind, empty: that is not a leak.
    const left = readdirSync(root).filter((name) => !(SKIPPED_FILE_DIR.test(name) && isEmptyDir(join(root, name))));
    rmSync(root, { recursive: true, force: true, maxRetries: 3 });
    if (left.length > 0) {
      console.error(`tests left ${left.length} entries in the temp dir (${root}, now removed): ${left.join(', ')}`);
      process.exitCode = 1;
    }
  };
}
