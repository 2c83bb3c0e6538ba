import { describe, expect, it } from 'vitest';
import { createAllocator, formatPlan, planJsonCompact, type Candidate, type Plan } from '../src/index.js';

/**
 * The plan writers (plan/serialize.ts) format rows from the plan's columns; their bytes must
 * be JSON.stringify's, which is computed here on a copy whose allocations are plain objects.
 */
function reference(plan: Plan, pretty: boolean): string {
  const copy = JSON.parse(JSON.stringify(structuredClone({ ...plan }))) as Plan;
  return pretty ? `${JSON.stringify(copy, null, 2)}\n` : JSON.stringify(copy);
}

function plans(): Plan[] {
  const a = createAllocator();
  a.observe([
    { prompt_id: 'seen', step: 0, rewards: [1, 0, 0.5], tokens: [10, 20, 30] },
    { prompt_id: 'é "quoted" \\ ✓', step: 0, reward: 1, group: 'g' },
  ]);
  const candidates: Candidate[] = [
    { id: 'seen', max_tokens: 100 },
    { id: 'é "quoted" \\ ✓', group: 'g', partial_rewards: [1, 0] },
    { id: 'new\nline', prompt_tokens: 12 },
    ...Array.from({ length: 50 }, (_, i) => ({ id: `p${i}`, ...(i % 3 === 0 ? { max_tokens: 512 } : {}) })),
  ];
  return [
    a.plan(candidates, { rollouts: 400 }, { seed: 3 }),
    a.plan(candidates, { rollouts: 40 }, { skip: true, roundsLeft: 2 }),
    a.plan(candidates, { tokens: 20_000 }, { prefillWeight: 1, policy: 'thompson' }),
    a.plan(candidates, { rollouts: 0 }, { skip: true }), // no allocations
  ];
}

describe('plan writers', () => {
  it('write JSON.stringify\'s bytes from the columns (pretty file, compact answer), empty plans included', () => {
    let checked = 0;
    for (const plan of plans()) {
      // From the columns first: reading `allocations` (as the reference does) switches the writers to the objects.
      const pretty = formatPlan(plan, 'json');
      const compact = planJsonCompact(plan);
      expect(plan.columns).toBeDefined();
      expect(pretty).toBe(reference(plan, true));
      expect(compact).toBe(reference(plan, false));
      checked++;
    }
    expect(checked).toBe(4);
  });

  it('write the objects when a caller has read or replaced the allocations (edits included)', () => {
    const [plan] = plans();
    plan!.allocations[0]!.n = 999;
    expect(formatPlan(plan!, 'json')).toContain('"n": 999');
    expect(planJsonCompact(plan!)).toContain('"n":999');
    const [other] = plans();
    other!.allocations = [];
    expect(JSON.parse(planJsonCompact(other!)).allocations).toEqual([]);
    expect(formatPlan(other!, 'jsonl').trim().split('\n')).toHaveLength(1);
  });
});
