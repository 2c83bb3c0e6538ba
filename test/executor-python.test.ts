import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { runCli } from '../src/cli/main.js';
import type { CliIo } from '../src/cli/io.js';
import { simPrompts } from './executor-helpers.js';

const root = join(import.meta.dirname, '..');
let dir: string | undefined;
afterEach(() => {
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
});

function unittest(folder: string, env: Record<string, string> = {}) {
  const run = spawnSync('python3', ['-m', 'unittest', 'discover', '-s', join(root, 'examples', folder), '-p', 'test_*.py', '-v'], {
    encoding: 'utf8',
    env: { ...process.env, PYTHONDONTWRITEBYTECODE: '1', ...env },
  });
  const ran = Number(/Ran (\d+) tests?/.exec(run.stderr)?.[1] ?? 0);
  return { code: run.status, ran, log: run.stderr };
}

describe('Python adapters (examples/, standard library only)', () => {
  it('verl: expands a real CLI plan into per-prompt repeats with the group uids (DataProto stand-in)', async () => {
    dir = mkdtempSync(join(tmpdir(), 'rb-py-'));
    const prompts = join(dir, 'prompts.jsonl');
    writeFileSync(prompts, simPrompts(7).candidates.map((c) => JSON.stringify(c)).join('\n'));
    const planPath = join(dir, 'plan.jsonl');
    const io: CliIo = { stdout: () => undefined, stderr: () => undefined, readStdin: async () => '', stderrIsTty: false };
    const code = await runCli(['plan', '--prompts', prompts, '--state', join(dir, 's.db'), '--budget-rollouts', '50', '--format', 'jsonl', '--out', planPath], io);
    expect(code).toBe(0);
    const result = unittest('verl', { RB_PLAN_JSONL: planPath });
    expect(result.log).toMatch(/OK/);
    expect(result.code).toBe(0);
    expect(result.ran).toBeGreaterThanOrEqual(4);
  });

  it('slime: builds groups of planned sizes with seeds and indices', () => {
    const result = unittest('slime');
    expect(result.code).toBe(0);
    expect(result.ran).toBeGreaterThanOrEqual(1);
  });
});
