import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { behindWarning, defaultDecay } from '../src/index.js';
import { cli } from './cli-helpers.js';
import { call, onEachServiceState } from './service-helpers.js';
import { tempDir } from './temp.js';

// A new run started on an old run's state (the CLI's default ./rollout-budget.db, or the same
// `serve --state` line run again): its results at step 1 were added as late results, at
// 0.995^999 = 0.0067 of a new result where a prompt had been observed at step 1000, and its
// plans read the old run's evidence, all without a word. Now the summary (and the plan) say so.

const OLD = '{"prompt_id":"a","step":1000,"rewards":[0,0,0,0,0,0,0,0]}\n';
const NEW = '{"prompt_id":"a","step":1,"rewards":[1,1,1,1,1,1,1,1]}\n{"prompt_id":"b","step":1,"rewards":[1,1,1,1,1,1,1,1]}\n';
const ADVICE = 'A new run on an old run\'s state? Give each run its own --state (or PostgreSQL schema); a run resumed from a checkpoint: docs/trainers.md, "Resuming a run from a checkpoint"';
const RESULTS_WARNING = `these results' newest step, 1, is 999 steps before the state's last step, 1000: a prompt observed at step 1000 counts them at 0.995^999 = 0.0067 of a new result. ${ADVICE}`;

function file(dir: string, name: string, text: string): string {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
}

describe('results or a plan far behind the state\'s last step', () => {
  it('warns from one half-life of forgetting on (λ^gap < ½), never at λ = 1 or at or after the last step', () => {
    // 0.995^138 = 0.5007 and 0.995^139 = 0.4982 (ln ½ / ln 0.995 = 138.28).
    expect(behindWarning('results', 862, 1000, defaultDecay)).toBeUndefined();
    expect(behindWarning('results', 861, 1000, defaultDecay)).toMatch(/^these results' newest step, 861, is 139 steps before the state's last step, 1000: .* at 0\.995\^139 = 0\.50 of a new result\./);
    expect(behindWarning('results', 1, 1000, { ...defaultDecay, forgetPerStep: 1 })).toBeUndefined();
    expect(behindWarning('results', 1000, 1000, defaultDecay)).toBeUndefined();
    expect(behindWarning('plan', 1001, 1000, defaultDecay)).toBeUndefined();
    expect(behindWarning('results', 1, null, defaultDecay)).toBeUndefined();
  });

  it('observe into SQLite: the summary carries the warning (and stderr shows it); results a resume replays are not warned of', async () => {
    const dir = tempDir();
    const state = join(dir, 'state.db');
    expect((await cli(['observe', '--results', file(dir, 'old.jsonl', OLD), '--state', state])).code).toBe(0);
    const r = await cli(['observe', '--results', file(dir, 'new.jsonl', NEW), '--state', state]);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({ applied: 16, duplicates: 0, aborted: 0, prompts: 2, last_step: 1000, warnings: [RESULTS_WARNING] });
    expect(r.stderr).toBe(`rollout-budget: warning: ${RESULTS_WARNING}\n`);
    // 100 steps back (a checkpoint's distance): counted at 0.61, no warning.
    const near = await cli(['observe', '--results', file(dir, 'near.jsonl', '{"prompt_id":"a","step":900,"rewards":[1,0]}\n'), '--state', state]);
    expect(near.stderr).toBe('');
    expect(JSON.parse(near.stdout).warnings).toBeUndefined();
  });

  it('a plan of an early step says so in its warnings', async () => {
    const dir = tempDir();
    const state = join(dir, 'state.db');
    await cli(['observe', '--results', file(dir, 'old.jsonl', OLD), '--state', state]);
    const prompts = file(dir, 'prompts.jsonl', '{"id":"a","max_tokens":100}\n');
    const early = JSON.parse((await cli(['plan', '--prompts', prompts, '--state', state, '--budget-rollouts', '8', '--step', '2'])).stdout);
    expect(early.warnings[0]).toBe(`planning step 2, 998 steps before the state's last step, 1000: the posteriors hold that run's later evidence, and a prompt observed at step 1000 counts this step's results at 0.995^998 = 0.0067 of a new result. ${ADVICE}`);
    for (const step of ['990', '1001']) {
      const plan = JSON.parse((await cli(['plan', '--prompts', prompts, '--state', state, '--budget-rollouts', '8', '--step', step])).stdout);
      expect(plan.warnings.filter((w: string) => w.startsWith('planning step'))).toEqual([]);
    }
  });

  it('the service answers the warning in its observe response (SQLite and PostgreSQL)', async () => {
    await onEachServiceState(tempDir(), async (port) => {
      expect((await call(port, 'POST', '/v1/observe', [{ prompt_id: 'a', step: 1000, rewards: [0, 0, 0, 0, 0, 0, 0, 0] }])).json.warnings).toBeUndefined();
      const r = await call(port, 'POST', '/v1/observe', [{ prompt_id: 'a', step: 1, rewards: [1, 1, 1, 1, 1, 1, 1, 1] }, { prompt_id: 'b', step: 1, rewards: [1, 1, 1, 1, 1, 1, 1, 1] }]);
      expect(r.status).toBe(200);
      expect(r.json).toEqual({ applied: 16, duplicates: 0, aborted: 0, prompts: 2, last_step: 1000, warnings: [RESULTS_WARNING] });
    });
  }, 60_000);
});
