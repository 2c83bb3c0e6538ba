import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { afterAll, expect } from 'vitest';
import { dropNotedSchemas } from '../pg-schemas.js';
import { removeFileDirs } from '../temp.js';

/**
 * Runs around every test file (vitest `setupFiles`): the file gets its own temp folder inside
 * the run's (`temp-run.ts`), as TMPDIR, and after its last test, once the folders `tempDir()`
 * made are removed, that folder must be empty: anything left there is named and fails the file.
 * Registered before the file's own hooks, so its `afterAll` runs after theirs. The PostgreSQL
 * schemas the file's `freshPgUrl` named are dropped then too (test/pg-schemas.ts).
 */
// At the top, not in a beforeAll: a test file's own top-level code runs before any hook.
const root = process.env.RB_TEST_TMP_ROOT ?? tmpdir();
const dir = mkdtempSync(join(root, `${basename(expect.getState().testPath ?? 'test').replace(/[^\w.-]/g, '_')}-`));
process.env.TMPDIR = dir;

afterAll(async () => {
  await dropNotedSchemas();
  removeFileDirs();
  const left = readdirSync(dir);
  rmSync(dir, { recursive: true, force: true, maxRetries: 3 });
  process.env.TMPDIR = root;
  if (left.length > 0) throw new Error(`this file left ${left.length} entries in its temp dir: ${left.join(', ')} (make them with tempDir() from test/temp.ts, or remove them)`);
});
