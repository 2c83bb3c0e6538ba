import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CLI, ROOT } from './service-helpers.js';

// The verl and slime integrations (with the state copied into verl's checkpoints, test_verl_checkpoint; and the dataset converter's ids, test_dataset; numpy and torch numbers sent by each client, test_numpy_values) against the trainers' own code (../shared/upstream, verl at
// b178a3c, slime at 624b824, with its image prompts and fanned-out rollouts, test_slime_samples; verl's agent loops with the plan's seeds, test_verl_agent_loop), which needs torch: Debian's python3-torch under /usr/bin/python3
// (and python3-omegaconf for verl's agent-loop config file, python3-pandas for pandas' missing values and torch tensors as ids and rewards in test_plan; .ci/setup-python.sh installs them). Without it: skipped with a message locally, a failure in CI.
const SYSTEM_PYTHON = '/usr/bin/python3';
const MODULES = ['tests.test_verl_upstream', 'tests.test_verl_e2e', 'tests.test_verl_batch_shape', 'tests.test_verl_rounds', 'tests.test_verl_reward_model', 'tests.test_verl_checkpoint', 'tests.test_slime', 'tests.test_slime_post_process', 'tests.test_slime_rounds', 'tests.test_slime_checkpoint', 'tests.test_slime_samples', 'tests.test_dataset', 'tests.test_numpy_values', 'tests.test_verl_agent_loop', 'tests.test_plan'];

function hasTorch(): boolean {
  const probe = spawnSync(SYSTEM_PYTHON, ['-c', 'import torch, numpy, httpx, PIL, omegaconf, pandas'], { encoding: 'utf8' });
  return probe.status === 0;
}

describe('Python integrations against verl and slime upstream code (/usr/bin/python3 with torch)', () => {
  const ready = hasTorch();
  if (!ready) {
    if (process.env.CI === 'true') throw new Error(`${SYSTEM_PYTHON} cannot import torch, numpy, httpx, PIL, omegaconf and pandas but CI=true: run .ci/setup-python.sh`);
    console.warn(`${SYSTEM_PYTHON} cannot import torch, numpy, httpx, PIL, omegaconf and pandas: skipping the verl and slime upstream tests (bash .ci/setup-python.sh installs them)`);
  }
  it.skipIf(!ready)('verl patch, advantages equal to core_algos, slime post-process and rollout function, three-step end-to-end runs', () => {
    const run = spawnSync(SYSTEM_PYTHON, ['-m', 'unittest', '-v', ...MODULES], {
      cwd: join(ROOT, 'python'),
      env: { ...process.env, RB_NODE: process.execPath, RB_CLI: CLI, PYTHONDONTWRITEBYTECODE: '1' },
      encoding: 'utf8',
      timeout: 240_000,
    });
    const out = `${run.stdout}${run.stderr}`;
    console.log(out.split('\n').filter((l) => /^(Ran|OK|FAILED|group_advantages vs verl|verl e2e|verl rounds|verl agent loop|slime e2e)/.test(l)).join('\n'));
    expect(run.error, out).toBeUndefined();
    expect(run.status, out).toBe(0);
    expect(Number(/^Ran (\d+) tests?/m.exec(out)?.[1])).toBeGreaterThanOrEqual(14);
    expect(out.split('\n').filter((l) => /\.\.\. skipped/.test(l))).toEqual([]);
    expect(out).toMatch(/group_advantages vs verl core_algos, 200 uneven instances/);
    expect(out).toMatch(/verl agent loop: \d+ rollouts, seeds/);
  }, 260_000);
});
