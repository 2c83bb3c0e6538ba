import { describe, expect, it } from 'vitest';
import {
  balancedValue, createRegistries, createReplayPolicyRegistry, parseScenario, planStep, runPolicies, simulatedEnvironment, snapshotOf,
  type Candidate, type PromptState, type ValueFunction,
} from '../src/index.js';

// One plan a step (plan's, the service's and the trainers' default) had no later round to top
// up the groups its posteriors misjudged: on a review's held-out pools (qualrev2, 2026-11-29) it
// was below uniform on hard positives, 0.61–0.75× at seeds 0–9 under a long-CoT token budget
// where hard prompts' answers run about 7× longer (the pool below), and on informative groups.
// A single-round step now values with `balanced` less its 0.05·n·I term and with half its hard
// weight (plan/planner.ts).

/** The review's pool s4a-tok-hardlong, shortened to 40 steps (its loss was in every third of the run). */
const HARD_LONG = JSON.stringify({
  name: 's4a-tok-hardlong', prompts: 512, batch: 64, steps: 40, seed: 404,
  budget: { rollouts_per_prompt: 16, tokens_per_prompt: 30000 },
  difficulty: { alpha: 0.319, beta: 0.628, unsolvable: 0.08 },
  drift: { learning_rate: 0.015, transfer: 0.0004 },
  length: { a: 9.3, b: -2.0, c: -0.267, sd_u: 0.286, sd_e: 0.331, cap: 16000 },
});

/** A copy of `balanced` under another name: the same terms, another object, so no step rewrites it. */
const plainBalanced: ValueFunction = { name: 'balanced-every-round', formula: balancedValue.formula, terms: balancedValue.terms };
const singleRoundForm: ValueFunction = {
  name: 'balanced-single-round', formula: 'I·(1 + 1.25q³ + 0.65·p·q²)',
  terms: balancedValue.terms.filter((t) => t.e !== 1).map((t) => (t.b === 3 && t.a === 0 ? { ...t, coef: t.coef / 2 } : t)),
};

function world(): { snapshot: ReturnType<typeof snapshotOf>; candidates: Candidate[] } {
  const states: PromptState[] = [];
  const candidates: Candidate[] = [];
  for (let i = 0; i < 60; i++) {
    candidates.push({ id: `p${i}`, max_tokens: 2048 });
    if (i % 6 === 5) continue; // new to the state
    const k = [0, 0, 1, 4, 7][i % 5]!;
    states.push({ id: `p${i}`, group: null, successes: k, failures: 8 - k, lastStep: 3, rollouts: 8, rewardSum: k, correctCount: k, correctTokens: k * 500, wrongCount: 8 - k, wrongTokens: (8 - k) * 1500 });
  }
  return { snapshot: snapshotOf(states, 3), candidates };
}

describe('a single-round step (roundsLeft 1, no partial rewards)', () => {
  const registries = createRegistries();
  registries.values.register(plainBalanced.name, plainBalanced);
  registries.values.register(singleRoundForm.name, singleRoundForm);
  const { snapshot, candidates } = world();
  const ns = (plan: { allocations: { n: number }[] }) => plan.allocations.map((a) => a.n);

  it('plans `balanced` as its single-round form, and differs from the plain form', () => {
    for (const budget of [{ rollouts: 480 }, { tokens: 500_000 }]) {
      const got = planStep(snapshot, candidates, budget, { step: 4 }, registries);
      const form = planStep(snapshot, candidates, budget, { step: 4, value: singleRoundForm.name }, registries);
      expect(ns(got)).toEqual(ns(form));
      expect(got.totals.objective).toBeCloseTo(form.totals.objective, 9);
      expect(got.value).toBe('balanced'); // the plan still names the value the caller chose
      const before = planStep(snapshot, candidates, budget, { step: 4, value: plainBalanced.name, freshCap: 0 }, registries);
      expect(ns(got), JSON.stringify(budget)).not.toEqual(ns(before));
    }
  });

  it('leaves a step of several rounds as it was: the first round and a later one (with partial rewards)', () => {
    const first = planStep(snapshot, candidates, { rollouts: 960 }, { step: 4, roundsLeft: 2 }, registries);
    expect(ns(first)).toEqual(ns(planStep(snapshot, candidates, { rollouts: 960 }, { step: 4, roundsLeft: 2, value: plainBalanced.name }, registries)));
    const later = candidates.map((c, i) => ({ ...c, partial_rewards: i % 3 === 0 ? [0, 0, 0] : [1, 0] }));
    const last = planStep(snapshot, later, { rollouts: 300 }, { step: 4, roundsLeft: 1 }, registries);
    expect(ns(last)).toEqual(ns(planStep(snapshot, later, { rollouts: 300 }, { step: 4, roundsLeft: 1, value: plainBalanced.name }, registries)));
  });

  it('is no longer below uniform on hard positives under a long-CoT token budget where hard answers run long (0.87× at seed 0 on these 40 steps before, 1.24× now)', () => {
    const scenario = parseScenario(HARD_LONG, 's4a-tok-hardlong.json');
    const [uniform, ours] = runPolicies(simulatedEnvironment(scenario), {
      policies: ['uniform', 'bayes'], registry: createReplayPolicyRegistry(), minN: 2, maxN: 64, seed: 0, plan: { rounds: 1 },
    });
    const hard = ours!.totals.hard_positives / uniform!.totals.hard_positives;
    const informative = ours!.totals.informative_groups / uniform!.totals.informative_groups;
    console.log(`s4a-tok-hardlong, 40 steps, one round a step, seed 0: hard positives ${hard.toFixed(3)}×, informative groups ${informative.toFixed(3)}× uniform's`);
    expect(hard).toBeGreaterThanOrEqual(1.0);
    expect(informative).toBeGreaterThanOrEqual(1.0);
  });
});
