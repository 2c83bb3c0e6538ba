import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { SimServer } from '../src/index.js';
import { cli } from './cli-helpers.js';
import { simPrompts } from './executor-helpers.js';
import { tempDir } from './temp.js';

let dir: string;
let server: SimServer | undefined;
beforeEach(() => {
  dir = tempDir('rb-loop-rounds-');
});
afterEach(async () => {
  await server?.close();
  server = undefined;
});

describe('loop in rounds against the sim-server (a test double of an OpenAI-compatible server)', () => {
  it('regression (loop reported half the budget as the budget, "need 64 rollouts; budget is 60"): 32 prompts, --budget-rollouts 120 plans and spends at most 120', async () => {
    const { candidates, sim } = simPrompts(32);
    server = new SimServer({ prompts: sim });
    const url = await server.start();
    const prompts = join(dir, 'prompts.jsonl');
    writeFileSync(prompts, candidates.map((c) => `${JSON.stringify(c)}\n`).join(''));
    const state = join(dir, 'state.db');
    const run = await cli(['loop', '--prompts', prompts, '--endpoint', url, '--model', 'sim', '--state', state, '--steps', '2', '--budget-rollouts', '120']);
    expect(run.code, run.stderr).toBe(0);
    const rows = run.stdout.trim().split('\n').map((l) => JSON.parse(l) as { step: number; prompts: number; planned: number; rollouts: number; applied: number; rounds: number });
    expect(rows.map((r) => r.step)).toEqual([0, 1]);
    for (const r of rows) {
      expect(r.prompts).toBe(32); // every prompt got its min_n in the first round
      expect(r.planned).toBeLessThanOrEqual(120);
      expect(r.planned).toBeGreaterThanOrEqual(64);
      expect(r.rollouts).toBe(r.planned);
      expect(r.applied).toBe(r.rollouts);
    }
    // Step 0's prompts are new: its first round takes ⌊60 + 0.7·60⌋ = 102. At step 1 they are not: the even
    // share of 60 grew to the 64 that min_n needs, and the loop said so.
    expect(run.stderr).not.toMatch(/step 0: warning: this round spends/);
    expect(run.stderr).toMatch(/step 1: warning: this round spends 64 of the 120 rollouts left \(an even share is 60\)/);
    // The server saw exactly what was planned: nothing beyond the budget.
    const served = Object.values(server.stats.choicesByPrompt).reduce((s, n) => s + n, 0);
    expect(served).toBe(rows.reduce((s, r) => s + r.planned, 0));
    // A warning both rounds' plans give (step 0: no length data yet) is printed once a step.
    const lengthData = run.stderr.split('\n').filter((l) => l.startsWith('step 0: warning:') && l.includes('have no length data'));
    expect(lengthData).toHaveLength(1);
  });

  it('a budget the whole step cannot give min_n is still an error, with the flags to change', async () => {
    const { candidates, sim } = simPrompts(32);
    server = new SimServer({ prompts: sim });
    const url = await server.start();
    const prompts = join(dir, 'prompts.jsonl');
    writeFileSync(prompts, candidates.map((c) => `${JSON.stringify(c)}\n`).join(''));
    const run = await cli(['loop', '--prompts', prompts, '--endpoint', url, '--model', 'sim', '--state', join(dir, 's.db'), '--budget-rollouts', '63']);
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/32 prompts × 2 rollouts \(--min-n\) need 64 rollouts; budget left \(whole, not a round's share\) is 63 rollouts\. Raise --budget-rollouts, lower --min-n, or set --skip/);
    expect(server.stats.requests).toBe(0);
  });
});
