import { describe, expect, it } from 'vitest';
import {
  RolloutBudgetError, createRegistries, createSolverRegistry, exactDp, planStep, snapshotOf, withFieldNames, type Candidate, type Solver,
} from '../src/index.js';

const empty = snapshotOf([], null);
const candidates: Candidate[] = Array.from({ length: 6 }, (_, i) => ({ id: `p${i}`, max_tokens: 1000 }));

describe('planStep takes its solver from the options (the registry, not a hard-coded greedy)', () => {
  it('runs the solver the options name, and only that one', () => {
    const registries = createRegistries();
    const calls: string[] = [];
    const spy = (name: string, inner: Solver): Solver => (input) => {
      calls.push(name);
      return inner(input);
    };
    registries.solvers.register('dp-spy', spy('dp-spy', (input) => exactDp(input)));
    const viaDp = planStep(empty, candidates, { rollouts: 30 }, { step: 0, value: 'knapsack', solver: 'dp-spy' }, registries);
    expect(calls).toEqual(['dp-spy']);
    // Knapsack value is concave in n and the costs are unit: the greedy is exact, so both agree on the objective.
    const viaGreedy = planStep(empty, candidates, { rollouts: 30 }, { step: 0, value: 'knapsack' }, registries);
    expect(viaDp.totals.objective).toBeCloseTo(viaGreedy.totals.objective, 9);
    expect(viaDp.totals.rollouts).toBeLessThanOrEqual(30);
  });

  it('an unknown solver lists the registered ones', () => {
    expect(() => planStep(empty, candidates, { rollouts: 30 }, { solver: 'simplex' }, createRegistries())).toThrow(/^solver: unknown name "simplex"; registered: greedy, dp, milp$/);
    expect(createSolverRegistry().names()).toEqual(['greedy', 'dp', 'milp']);
  });
});

describe('withFieldNames: a front end shows the library\'s option fields in its own terms', () => {
  it('renames whole words only, and keeps an error without fields as it is', () => {
    const error = new RolloutBudgetError('BUDGET_INFEASIBLE', 'need 9 tokens; raise budget_tokens or lower min_n', 2, ['budget_tokens', 'min_n']);
    const shown = withFieldNames(error, { budget_tokens: '--budget-tokens', min_n: '--min-n', tokens: '--nope' });
    expect(shown.message).toBe('need 9 tokens; raise --budget-tokens or lower --min-n');
    expect(shown.code).toBe('BUDGET_INFEASIBLE');
    expect(shown.fields).toEqual(['--budget-tokens', '--min-n']);
    const plain = new RolloutBudgetError('BAD_INPUT', 'p.jsonl:3: "max_tokens" must be a positive integer, got -3');
    expect(withFieldNames(plain, { max_tokens: '--max-tokens' })).toBe(plain);
  });

  it('never renames inside a quoted value: what the caller gave is shown as given', () => {
    const error = new RolloutBudgetError('BAD_OPTION', 'policy: unknown name "policy"; registered: bayes', 2, ['policy']);
    expect(withFieldNames(error, { policy: '--policy' }).message).toBe('--policy: unknown name "policy"; registered: bayes');
    const escaped = new RolloutBudgetError('BAD_OPTION', 'min_n must be at most 4, got "a \\"min_n\\" b" (min_n)', 2, ['min_n']);
    expect(withFieldNames(escaped, { min_n: '--min-n' }).message).toBe('--min-n must be at most 4, got "a \\"min_n\\" b" (--min-n)');
  });
});
