// Issue 16, item 6: `npm test` left ~35 folders in the system temp dir. The check that now fails
// a test file leaving anything there (test/setup/) must itself be able to fail: this runs vitest
// on two small test files with the project's setup, one that cleans up through tempDir() and one
// that leaves a folder behind.
import { spawnSync } from 'node:child_process';
import { readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { tempDir } from './temp.js';

const ROOT = join(import.meta.dirname, '..');

/** Runs vitest on one test file with this project's temp-dir setup; returns its exit code and output. */
function nestedRun(body: string): { code: number | null; output: string; left: string[] } {
  const dir = tempDir('rb-nested-');
  writeFileSync(join(dir, 'vitest.config.mjs'), `export default { test: {
    include: ['case.test.mjs'],
    globalSetup: [${JSON.stringify(join(ROOT, 'test', 'setup', 'temp-run.ts'))}],
    setupFiles: [${JSON.stringify(join(ROOT, 'test', 'setup', 'temp-check.ts'))}],
  } };\n`);
  writeFileSync(join(dir, 'case.test.mjs'), body);
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('VITEST') && k !== 'RB_TEST_TMP_ROOT'));
  const before = new Set(readdirSync(tmpdir()));
  const run = spawnSync(process.execPath, [join(ROOT, 'node_modules', 'vitest', 'vitest.mjs'), 'run', '--root', dir, '--config', join(dir, 'vitest.config.mjs')], {
    cwd: dir, env, encoding: 'utf8', timeout: 120_000,
  });
  return { code: run.status, output: `${run.stdout}\n${run.stderr}`, left: readdirSync(tmpdir()).filter((f) => !before.has(f)) };
}

const imports = `import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { tempDir } from ${JSON.stringify(join(ROOT, 'test', 'temp.ts'))};
`;

describe('the temp-dir check (test/setup/)', () => {
  it('passes a file whose folders come from tempDir(), at the top and inside a test, and removes them', () => {
    const run = nestedRun(`${imports}
const top = tempDir('rb-top-');
writeFileSync(join(top, 'state.db'), 'x');
it('writes', () => {
  writeFileSync(join(tempDir('rb-inner-'), 'plan.json'), '{}');
  expect(tmpdir()).toMatch(/case\\.test\\.mjs-/);
});
`);
    expect(run.code, run.output).toBe(0);
    expect(run.left).toEqual([]);
  });

  it('fails a file that leaves a folder in the temp dir, naming it, and still removes it', () => {
    const run = nestedRun(`${imports}
it('leaks', () => {
  mkdtempSync(join(tmpdir(), 'rb-leak-'));
  expect(1).toBe(1);
});
`);
    expect(run.code, run.output).not.toBe(0);
    expect(run.output).toMatch(/this file left 1 entries in its temp dir: rb-leak-\w+/);
    expect(run.left).toEqual([]);
  });
});
