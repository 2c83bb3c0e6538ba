import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  LoggedRun, createReplayPolicyRegistry, epochsOf, parseVisits, replayEnvironment, runPolicies, spearman, type Environment, type Visit,
} from '../src/index.js';

const fixture = parseVisits(readFileSync(new URL('../fixtures/oneshot-rlvr-dsr-sub/visits.jsonl', import.meta.url), 'utf8'), 'visits.jsonl');

describe('replay engine', () => {
  it('replaying uniform on the fixture reproduces the logged outcome statistics exactly', () => {
    const run = new LoggedRun(fixture);
    const [u] = runPolicies(replayEnvironment(run), { policies: ['uniform'], registry: createReplayPolicyRegistry(), minN: 2, maxN: 64, seed: 7 });
    // Independent count straight from the log: mixed groups, all-correct, all-wrong.
    const mixed = fixture.filter((v) => v.correct > 0 && v.correct < v.n);
    const rollouts = fixture.reduce((s, v) => s + v.n, 0);
    const t = u!.totals;
    expect(t.groups).toBe(fixture.length);
    expect(t.rollouts).toBe(rollouts);
    expect(t.informative_groups).toBe(mixed.length);
    expect(t.effective_ratio).toBeCloseTo(mixed.reduce((s, v) => s + v.n, 0) / rollouts, 12);
    expect(t.all_correct_ratio).toBeCloseTo(fixture.filter((v) => v.correct === v.n).length / fixture.length, 12);
    expect(t.all_wrong_ratio).toBeCloseTo(fixture.filter((v) => v.correct === 0).length / fixture.length, 12);
    // Hard: pass rate pooled over the visit and its neighbours ≤ 0.2, recomputed here by hand.
    const byPrompt = new Map<string, Visit[]>();
    for (const v of fixture) byPrompt.set(v.prompt_id, [...(byPrompt.get(v.prompt_id) ?? []), v]);
    let hard = 0;
    for (const list of byPrompt.values()) {
      list.sort((a, b) => a.step - b.step);
      list.forEach((v, j) => {
        const near = list.slice(Math.max(0, j - 1), j + 2);
        const rate = near.reduce((s, x) => s + x.correct, 0) / near.reduce((s, x) => s + x.n, 0);
        if (rate <= 0.2 && v.correct > 0) hard++;
      });
    }
    expect(t.hard_positives).toBe(hard);
    expect(t.budget_compliance).toBe(1);
    // Per step too: every step's informative count is the log's.
    const perStep = new Map<number, number>();
    for (const v of mixed) perStep.set(v.step, (perStep.get(v.step) ?? 0) + 1);
    const steps = u!.steps;
    expect(steps.length).toBe(run.steps.length);
    for (const s of steps) expect(s.informative).toBe(perStep.get(s.step) ?? 0);
  });

  it('a policy cannot see the step it is scored on: outcomes planted from step T on never change plans up to T', () => {
    const T = 25;
    const base = fixture.filter((v) => v.step <= 45);
    // The plant: every group from step T on flips (k → n − k), the most informative change possible.
    const planted = base.map((v) => (v.step >= T ? { ...v, correct: v.n - v.correct } : v));
    const registry = createReplayPolicyRegistry();
    const local = ['uniform', 'knapsack-rl'];
    // xrpo, and our policies (two rounds a step by default), size groups in rounds inside the
    // step from the rollouts they generated there, so their step-T sizes may depend on step T's
    // own (generated) outcomes, never on later ones. In one round, ours are checked up to T below.
    const rounds = ['xrpo', 'bayes', 'thompson', 'mean'];
    const pooled = ['dapo', 'greso', 'mopps'];
    // max_n 8 = the logged group size: every outcome is a logged one, none comes from the pooled
    // rate; 6 rollouts a prompt leaves the policies a choice.
    const options = { policies: [...local, ...rounds, ...pooled], registry, minN: 2, maxN: 8, seed: 3, budget: { rollouts: 6 * 43 } };
    const a = runPolicies(replayEnvironment(new LoggedRun(base)), options);
    const b = runPolicies(replayEnvironment(new LoggedRun(planted)), options);
    let compared = 0;
    a.forEach((ra, k) => {
      const rb = b[k]!;
      // Policies that draw from later batches (refills, pools) generate ahead: dapo up to 10
      // batches, greso until its budget is filled (within 10 here), mopps one.
      const last = local.includes(ra.name) ? T : rounds.includes(ra.name) ? T - 1 : T - 11;
      for (let s = 0; s <= last; s++) {
        expect(rb.allocations[s], `${ra.name} at step ${s}`).toBe(ra.allocations[s]);
        compared++;
      }
      // And the plant is real: something after T differs for every policy that adapts.
      if (ra.name !== 'uniform') expect(rb.allocations.slice(T + 1).join('|'), ra.name).not.toBe(ra.allocations.slice(T + 1).join('|'));
    });
    expect(compared).toBeGreaterThan(150);
    // Ours in one round a step: nothing of step T reaches its plan.
    const single = { ...options, policies: ['bayes', 'thompson', 'mean'], plan: { rounds: 1 } };
    const a1 = runPolicies(replayEnvironment(new LoggedRun(base)), single);
    const b1 = runPolicies(replayEnvironment(new LoggedRun(planted)), single);
    a1.forEach((ra, k) => {
      for (let s = 0; s <= T; s++) expect(b1[k]!.allocations[s], `${ra.name} (1 round) at step ${s}`).toBe(ra.allocations[s]);
      expect(b1[k]!.allocations.slice(T + 1).join('|'), ra.name).not.toBe(ra.allocations.slice(T + 1).join('|'));
    });
  });

  it('the data loader\'s epoch counts up at the first batch that repeats a prompt of the current epoch', () => {
    const batches = [['a', 'b'], ['c', 'd'], ['a', 'c'], ['b', 'd'], ['a', 'b']];
    const env = { batch: (s: number) => batches[s]!.map((id) => ({ id })) } as unknown as Environment;
    expect([...epochsOf(env, [0, 1, 2, 3, 4]).values()]).toEqual([0, 0, 1, 1, 2]);
  });

  describe('data stream: consumed (default) or shared', () => {
    // Every group all wrong but x's at step 1 (8/8), so dapo refills until the stream ends.
    // x is logged again at step 3 (0/8): its visit at step 1 pools to (8 + 0)/16 = 0.5.
    const visits: Visit[] = [
      { step: 0, prompt_id: 'p0', n: 8, correct: 0 }, { step: 0, prompt_id: 'p1', n: 8, correct: 0 },
      { step: 1, prompt_id: 'x', n: 8, correct: 8 }, { step: 1, prompt_id: 'p2', n: 8, correct: 0 },
      { step: 2, prompt_id: 'p3', n: 8, correct: 0 }, { step: 2, prompt_id: 'p4', n: 8, correct: 0 },
      { step: 3, prompt_id: 'x', n: 8, correct: 0 }, { step: 3, prompt_id: 'p5', n: 8, correct: 0 },
    ];
    const run = (stream: 'consumed' | 'shared') =>
      runPolicies(replayEnvironment(new LoggedRun(visits)), { policies: ['dapo', 'uniform'], registry: createReplayPolicyRegistry(), minN: 2, maxN: 8, seed: 1, stream });

    it('consumed: prompts a refill generated are gone from their own batch later', () => {
      const [dapo, uniform] = run('consumed');
      // Step 0 refilled through step 3's batch but x's visit there; step 2 pulls that one ahead.
      expect(dapo!.allocations).toEqual(['p0:8,p1:8,x:8,p2:8,p3:8,p4:8,p5:8', '', 'x:8', '']);
      expect(uniform!.allocations).toEqual(['p0:8,p1:8', 'x:8,p2:8', 'p3:8,p4:8', 'x:8,p5:8']);
    });

    it('shared: every step offers its whole batch, and a logged visit is drawn only once (then from its pooled rate)', () => {
      const [dapo, uniform] = run('shared');
      expect(dapo!.allocations[0]).toBe('p0:8,p1:8,x:8,p2:8,p3:8,p4:8,p5:8');
      expect(dapo!.allocations[1]!.startsWith('x:8,p2:8')).toBe(true);
      // Step 1's x continues the draw its step-0 refill began: the logged 8/8 is used up, so its
      // 8 rollouts are Bernoulli(0.5) draws, not the logged all-correct group again.
      expect(dapo!.steps[1]!.allCorrect).toBe(0);
      expect(dapo!.steps[0]!.allCorrect).toBe(1);
      expect(dapo!.steps[0]!.modelled).toBe(0);
      expect(dapo!.steps[1]!.modelled).toBe(40); // x, p2 and the refills p3..p5: each visit's logged 8 used at step 0
      expect(uniform!.totals.modelled_share).toBe(0);
      // A policy that never pulls ahead sees the same either way.
      expect(uniform!.allocations).toEqual(['p0:8,p1:8', 'x:8,p2:8', 'p3:8,p4:8', 'x:8,p5:8']);
    });
  });

  it('spearman: ties averaged, perfect and reversed orders', () => {
    expect(spearman([1, 2, 3, 4], [10, 20, 30, 40])).toBeCloseTo(1, 12);
    expect(spearman([1, 2, 3, 4], [4, 3, 2, 1])).toBeCloseTo(-1, 12);
    expect(spearman([1, 1, 2, 2], [1, 2, 3, 4])).toBeCloseTo(0.894427191, 6);
    expect(spearman([1, 1, 1], [1, 2, 3])).toBe(0);
  });
});
