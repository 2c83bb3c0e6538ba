import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CLI, ROOT } from './service-helpers.js';

describe('Python client (clients/python) against a real service', () => {
  it('passes its unittest suite with python3', () => {
    const run = spawnSync('python3', ['-m', 'unittest', '-v', 'test_rollout_budget_client'], {
      cwd: join(ROOT, 'clients', 'python'),
      env: { ...process.env, RB_NODE: process.execPath, RB_CLI: CLI, PYTHONDONTWRITEBYTECODE: '1' },
      encoding: 'utf8',
      timeout: 90_000,
    });
    const out = `${run.stdout}${run.stderr}`;
    console.log(out.split('\n').filter((l) => /^(Ran|OK|FAILED)/.test(l)).join('\n'));
    expect(run.error, out).toBeUndefined();
    expect(run.status, out).toBe(0);
    const ran = Number(/^Ran (\d+) tests?/m.exec(out)?.[1]);
    expect(ran).toBeGreaterThanOrEqual(6);
    expect(out).toMatch(/^OK$/m);
  }, 100_000);
});
