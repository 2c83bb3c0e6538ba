import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import seedrandom from 'seedrandom';
import { beforeEach, describe, expect, it } from 'vitest';
import {
  RolloutBudgetError, createRegistries, grownShareWarning, parseScenario, planStep, roundShare, simulatedEnvironment, snapshotOf, type Candidate, type Plan,
  type PromptState,
} from '../src/index.js';
import { cli } from './cli-helpers.js';
import { tempDir } from './temp.js';

const registries = createRegistries();
const empty = snapshotOf([], null);

let dir: string;
beforeEach(() => {
  dir = tempDir('rb-rounds-left-');
});

describe('the round share rule (plan/rounds.ts)', () => {
  it('is an even share of what is left, floored, per budget', () => {
    expect(roundShare({ rollouts: 121, tokens: 1001 }, 2, { rollouts: 0, tokens: 0 })).toEqual({ budget: { rollouts: 60, tokens: 500 }, grown: [] });
    expect(roundShare({ rollouts: 90 }, 3, { rollouts: 10, tokens: 5000 })).toEqual({ budget: { rollouts: 30 }, grown: [] });
    expect(roundShare({ tokens: 7 }, 1, { rollouts: 0, tokens: 0 })).toEqual({ budget: { tokens: 7 }, grown: [] });
  });

  it('grows a share to what the lower bounds need, never past what is left', () => {
    expect(roundShare({ rollouts: 120, tokens: 1000 }, 2, { rollouts: 64, tokens: 400.2 })).toEqual({ budget: { rollouts: 64, tokens: 500 }, grown: ['rollouts'], shares: { rollouts: 60, tokens: 500 } });
    expect(roundShare({ rollouts: 120, tokens: 1000 }, 2, { rollouts: 10, tokens: 700.2 })).toEqual({ budget: { rollouts: 60, tokens: 701 }, grown: ['tokens'], shares: { rollouts: 60, tokens: 500 } });
    expect(roundShare({ rollouts: 50 }, 2, { rollouts: 64, tokens: 0 })).toEqual({ budget: { rollouts: 50 }, grown: ['rollouts'], shares: { rollouts: 25 } });
  });

  it('gives a round of prompts new to the state φ·u of the later rounds\' budget on top of its even share', () => {
    const none = { rollouts: 0, tokens: 0 };
    // u = 1, φ = 0.7: ⌊60 + 0.7·60⌋ = 102 of 120; ⌊500 + 0.7·500⌋ = 850 of 1000.
    expect(roundShare({ rollouts: 120, tokens: 1000 }, 2, none, 1, 0.7)).toEqual({ budget: { rollouts: 102, tokens: 850 }, grown: [] });
    // u = 0.5, three rounds: E = 30, ⌊30 + 0.7·0.5·60⌋ = 51 of 90.
    expect(roundShare({ rollouts: 90 }, 3, none, 0.5, 0.7)).toEqual({ budget: { rollouts: 51 }, grown: [] });
    // The last round takes what is left whatever u is; φ = 0 is the even rule.
    expect(roundShare({ rollouts: 90 }, 1, none, 1, 0.7)).toEqual({ budget: { rollouts: 90 }, grown: [] });
    expect(roundShare({ rollouts: 121 }, 2, none, 1, 0)).toEqual({ budget: { rollouts: 60 }, grown: [] });
    // A fresh share below what min_n needs still grows, and the warning gives both shares.
    const share = roundShare({ rollouts: 120 }, 2, { rollouts: 110, tokens: 0 }, 1, 0.7);
    expect(share).toEqual({ budget: { rollouts: 110 }, grown: ['rollouts'], shares: { rollouts: 102 } });
    expect(grownShareWarning(share, { rollouts: 120 }, 2, 55, 2)).toBe('this round spends 110 of the 120 rollouts left (an even share is 60, its share with new prompts 102): 55 prompts without partial_rewards need min_n 2 each; the last round gets the rest');
  });
});

describe('plan with rounds left: the budget given is what is left of the step', () => {
  const fresh = (n: number): Candidate[] => Array.from({ length: n }, (_, i) => ({ id: `p${i}`, max_tokens: 1000 }));

  it('spends its share: prompts new to the state take φ·u of the later rounds\' budget on top of an even share', () => {
    // 8 new prompts, u = 1: ⌊32 + 0.7·32⌋ = 54 of 64.
    expect(planStep(empty, fresh(8), { rollouts: 64 }, { step: 0, roundsLeft: 2 }, registries).budget.rollouts).toBe(54);
    // 4 of 8 observed before: u = 0.5, ⌊32 + 0.7·0.5·32⌋ = 43.
    const seen: PromptState[] = fresh(4).map((c) => ({ id: c.id, group: null, successes: 3, failures: 5, lastStep: 0, rollouts: 8, rewardSum: 3, correctCount: 0, correctTokens: 0, wrongCount: 0, wrongTokens: 0 }));
    const half = fresh(8);
    expect(planStep(snapshotOf(seen), half, { rollouts: 64 }, { step: 1, roundsLeft: 2 }, registries).budget.rollouts).toBe(43);
    // Partial rewards count as evidence: a later round's prompts are not new.
    const later = half.map((c, i) => (i < 4 ? c : { ...c, partial_rewards: [1, 0] }));
    expect(planStep(empty, later, { rollouts: 64 }, { step: 0, roundsLeft: 2 }, registries).budget.rollouts).toBe(43);
    // φ = 0: the even rule.
    expect(planStep(empty, fresh(8), { rollouts: 64 }, { step: 0, roundsLeft: 2, freshShare: 0 }, registries).budget.rollouts).toBe(32);
    expect(() => planStep(empty, fresh(8), { rollouts: 64 }, { roundsLeft: 2, freshShare: 1.5 }, registries)).toThrow(/fresh_share must be in \[0, 1\], got 1\.5/);
  });

  it('spends an even share (φ = 0), and says what was left and how many rounds', () => {
    const plan = planStep(empty, fresh(8), { rollouts: 64 }, { step: 0, roundsLeft: 2, freshShare: 0 }, registries);
    expect(plan.budget).toEqual({ rollouts: 32, tokens: null });
    expect(plan.rounds_left).toBe(2);
    expect(plan.budget_left).toEqual({ rollouts: 64, tokens: null });
    expect(plan.totals.rollouts).toBe(32);
    const one = planStep(empty, fresh(8), { rollouts: 64 }, { step: 0 }, registries);
    expect(one.rounds_left).toBeUndefined();
    expect(Object.keys(one)).not.toContain('budget_left');
    expect(one.totals.rollouts).toBe(64);
  });

  it('regression (loop reported half the budget as the budget): 32 prompts, 120 rollouts left, 2 rounds → the first round gets the 64 min_n needs', () => {
    const plan = planStep(empty, fresh(32), { rollouts: 120 }, { step: 0, roundsLeft: 2, freshShare: 0 }, registries);
    expect(plan.totals.rollouts).toBe(64);
    expect(plan.budget.rollouts).toBe(64);
    expect(plan.allocations.every((a) => a.n === 2)).toBe(true);
    expect(plan.warnings.join('\n')).toMatch(/this round spends 64 of the 120 rollouts left \(an even share is 60\): 32 prompts without partial_rewards need min_n 2 each/);
  });

  it('grows the token share to the expected tokens min_n needs, prefill included', () => {
    const candidates = fresh(10).map((c) => ({ ...c, prompt_tokens: 50 }));
    // 10 prompts × 2 × 1000 tokens (assumed max_tokens) + 10 × 0.5 × 50 prefill = 20250 > 30000 / 2.
    const plan = planStep(empty, candidates, { tokens: 30000 }, { step: 0, roundsLeft: 2, prefillWeight: 0.5, freshShare: 0 }, registries);
    expect(plan.budget.tokens).toBe(20250);
    expect(plan.totals.expected_tokens).toBeLessThanOrEqual(20250);
    expect(plan.warnings.some((w) => w.includes('20250 of the 30000 tokens left'))).toBe(true);
  });

  it('is infeasible only when the whole budget left is, and says it is the whole budget', () => {
    const call = () => planStep(empty, fresh(32), { rollouts: 63 }, { step: 0, roundsLeft: 2 }, registries);
    expect(call).toThrow(RolloutBudgetError);
    expect(call).toThrow(/32 prompts × 2 rollouts \(min_n\) need 64 rollouts.*budget left \(whole, not a round's share\) is 63 rollouts/);
    try {
      call();
    } catch (error) {
      expect((error as RolloutBudgetError).code).toBe('BUDGET_INFEASIBLE');
      expect((error as RolloutBudgetError).fields).toEqual(['budget_rollouts', 'min_n', 'skip']);
    }
  });

  it('a later round (every prompt has partial rewards) needs no min_n: any budget left plans', () => {
    const later = fresh(4).map((c) => ({ ...c, partial_rewards: [0, 0] }));
    const plan = planStep(empty, later, { rollouts: 3 }, { step: 0, roundsLeft: 2 }, registries);
    expect(plan.budget.rollouts).toBe(1);
    expect(plan.totals.rollouts).toBeLessThanOrEqual(1);
    expect(plan.warnings.some((w) => w.startsWith('this round spends'))).toBe(false);
  });

  it('with multiple_of, a grown share is the multiple at or above what min_n needs, and each round is a multiple', () => {
    // 43 prompts × min_n 2 = 86 > 120 / 2: the share grows to 88, the multiple of 8 above 86.
    const first = planStep(empty, fresh(43), { rollouts: 120 }, { step: 0, roundsLeft: 2, multipleOf: 8, freshShare: 0 }, registries);
    expect(first.budget.rollouts).toBe(88);
    expect(first.totals.rollouts).toBe(88);
    const later = fresh(43).map((c) => ({ ...c, partial_rewards: [0, 1] }));
    const second = planStep(empty, later, { rollouts: 120 - 88 }, { step: 0, roundsLeft: 1, multipleOf: 8 }, registries);
    expect(second.totals.rollouts % 8).toBe(0);
    expect(first.totals.rollouts + second.totals.rollouts).toBeLessThanOrEqual(120);
    expect(() => planStep(empty, fresh(43), { rollouts: 87 }, { step: 0, roundsLeft: 2, multipleOf: 8 }, registries)).toThrow(/need 88 rollouts \(multiple_of 8\)/);
  });

  it('rejects rounds_left below 1, naming the field', () => {
    expect(() => planStep(empty, fresh(2), { rollouts: 8 }, { roundsLeft: 0 }, registries)).toThrow(/rounds_left must be an integer ≥ 1, got 0/);
  });
});

describe('plan --rounds-left 2, then --rounds-left 1 with partial rewards, on the long-CoT scenario (64 prompts, max_tokens 16000, 30000×64 tokens, 8×64 rollouts)', () => {
  it('never exits infeasible while the whole budget could give every prompt min_n, and the two rounds never exceed either budget', async () => {
    const scenario = parseScenario(readFileSync(join(import.meta.dirname, '..', 'fixtures', 'scenarios', 'long-cot-competition.json'), 'utf8'), 'long-cot-competition.json');
    const env = simulatedEnvironment(scenario);
    const world = env.fork();
    const budget = env.defaultBudget(0);
    expect(budget).toEqual({ rollouts: 512, tokens: 1_920_000 });
    const state = join(dir, 'state.db');
    const promptsFile = join(dir, 'prompts.jsonl');
    const write = (path: string, rows: readonly Candidate[]) => writeFileSync(path, rows.map((c) => `${JSON.stringify(c)}\n`).join(''));
    const draw = (step: number, id: string, n: number, drawn: Map<string, ReturnType<typeof world.drawer>>) => {
      let d = drawn.get(id);
      if (d === undefined) drawn.set(id, (d = world.drawer(step, step, id, seedrandom(`rounds-left/${step}/${id}`))));
      return Array.from({ length: n }, () => d!.next());
    };
    const observe = async (step: number, groups: Map<string, { reward: number; tokens: number | null }[]>) => {
      const lines = [...groups].map(([id, out]) => JSON.stringify({ prompt_id: id, step, rewards: out.map((o) => o.reward), tokens: out.map((o) => o.tokens) }));
      const path = join(dir, `results-${step}.jsonl`);
      writeFileSync(path, `${lines.join('\n')}\n`);
      expect((await cli(['observe', '--results', path, '--state', state])).code).toBe(0);
    };
    const flags = (b: { rollouts?: number; tokens?: number }) => ['--budget-rollouts', String(b.rollouts), '--budget-tokens', String(b.tokens)];

    let feasible = 0;
    let infeasible = 0;
    let grown = 0;
    for (let step = 0; step < 12; step++) {
      const candidates = env.batch(step);
      expect(candidates.length).toBe(64);
      expect(candidates.every((c) => c.max_tokens === 16000)).toBe(true);
      write(promptsFile, candidates);
      const minN = [2, 3, 4][step % 3]!;
      const common = ['plan', '--prompts', promptsFile, '--state', state, '--step', String(step), '--min-n', String(minN)];
      const drawn = new Map<string, ReturnType<typeof world.drawer>>();
      const groups = new Map<string, { reward: number; tokens: number | null }[]>();
      // The independent check: can the whole budget give every prompt min_n in one plan?
      const whole = await cli([...common, ...flags(budget)]);
      // Odd steps with the even rule (--fresh-share 0), so shares that must grow occur also while prompts are new.
      const first = await cli([...common, ...flags(budget), '--rounds-left', '2', ...(step % 2 === 1 ? ['--fresh-share', '0'] : [])]);
      if (whole.code !== 0) {
        expect(whole.stderr).toMatch(/budget infeasible/);
        expect(first.code, `step ${step}: ${first.stderr}`).toBe(2);
        expect(first.stderr).toMatch(/budget infeasible: 64 prompts × \d rollouts \(--min-n\) need .*budget left \(whole, not a round's share\) is 512 rollouts, 1920000 tokens( \(\d+ prompts? ha(s|ve) no length data .*\))?\. Raise --budget-rollouts or --budget-tokens, lower --min-n, or set --skip/);
        infeasible++;
        // Keep the state moving: a selecting plan (--skip) for this step.
        const skip = await cli([...common, ...flags(budget), '--skip']);
        expect(skip.code).toBe(0);
        for (const a of (JSON.parse(skip.stdout) as Plan).allocations) groups.set(a.prompt_id, draw(step, a.prompt_id, a.n, drawn));
        await observe(step, groups);
        continue;
      }
      expect(first.code, `step ${step} min_n ${minN}: ${first.stderr}`).toBe(0);
      feasible++;
      const plan1 = JSON.parse(first.stdout) as Plan;
      if (plan1.warnings.some((w) => w.startsWith('this round spends'))) grown++;
      expect(plan1.allocations.length).toBe(64);
      for (const a of plan1.allocations) groups.set(a.prompt_id, draw(step, a.prompt_id, a.n, drawn));
      // Round 2: what is left after round 1's rollouts and expected tokens; rewards so far as partial_rewards.
      const left = { rollouts: budget.rollouts! - plan1.totals.rollouts, tokens: budget.tokens! - plan1.totals.expected_tokens };
      expect(left.rollouts).toBeGreaterThanOrEqual(0);
      expect(left.tokens).toBeGreaterThanOrEqual(0);
      const second = join(dir, 'step2.jsonl');
      write(second, candidates.map((c) => ({ ...c, partial_rewards: groups.get(c.id)!.map((o) => o.reward) })));
      const last = await cli(['plan', '--prompts', second, '--state', state, '--step', String(step), '--min-n', String(minN), ...flags(left), '--rounds-left', '1']);
      expect(last.code, `step ${step}, round 2: ${last.stderr}`).toBe(0);
      const plan2 = JSON.parse(last.stdout) as Plan;
      expect(plan1.totals.rollouts + plan2.totals.rollouts).toBeLessThanOrEqual(budget.rollouts!);
      expect(plan1.totals.expected_tokens + plan2.totals.expected_tokens).toBeLessThanOrEqual(budget.tokens! + 1);
      for (const a of plan2.allocations) {
        expect(a.first_rollout).toBe(groups.get(a.prompt_id)!.length);
        groups.get(a.prompt_id)!.push(...draw(step, a.prompt_id, a.n, drawn));
      }
      await observe(step, groups);
    }
    // The loop must have met every case it is about.
    expect(feasible).toBeGreaterThanOrEqual(4);
    expect(infeasible).toBeGreaterThanOrEqual(1);
    expect(grown).toBeGreaterThanOrEqual(2);
  });
});
