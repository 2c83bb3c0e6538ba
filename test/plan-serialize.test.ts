import seedrandom from 'seedrandom';
import { describe, expect, it } from 'vitest';
import { createAllocator, formatPlan, planJsonCompact, planStep, type Candidate, type Plan } from '../src/index.js';
import { planChunks } from '../src/plan/exports.js';
import { chunkText } from '../src/plan/byte-chunk.js';
import { release, rowTexts } from '../src/plan/text-cache.js';
import { noteFieldsChecked } from '../src/plan/checked-ids.js';

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
    // Rows with first_rollout (a later round's), between others and last.
    { id: 'partial-mid', partial_rewards: [0] },
    ...Array.from({ length: 50 }, (_, i) => ({ id: `p${i}`, ...(i % 3 === 0 ? { max_tokens: 512 } : {}) })),
    { id: 'partial-last', partial_rewards: [0, 0] },
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
    const rows = plans()[0]!.allocations;
    expect(rows.find((r) => r.prompt_id === 'partial-mid')?.first_rollout).toBe(1);
    expect(rows.at(-1)).toMatchObject({ prompt_id: 'partial-last', first_rollout: 2 });
  });

  it('write the same bytes from the columns as from the objects when many rows share and collide in the formatting caches', () => {
    // 3,000 prompts, many sharing a posterior (counts 0-9): the writers' text caches (2^12
    // slots here) both hit and overwrite; the jsonl lines are checked against planGroups'.
    const random = seedrandom('plan-serialize-caches');
    const a = createAllocator();
    const results = [];
    for (let i = 0; i < 3000; i++) {
      const rewards = Array.from({ length: Math.floor(random() * 10) }, () => (random() < 0.3 ? 1 : 0));
      if (rewards.length > 0) results.push({ prompt_id: `q${i}`, step: i % 3, rewards });
    }
    a.observe(results);
    const candidates: Candidate[] = Array.from({ length: 3000 }, (_, i) => ({
      id: i % 500 === 0 ? `q${i} "é\u2028 \ud800` : `q${i}`,
      ...(i % 7 === 0 ? {} : { max_tokens: 256 * (1 + (i % 5)) }),
      ...(i % 11 === 0 ? { prompt_tokens: i } : {}),
    }));
    // Every entry refuses a lone surrogate in an id (no state can store it), planStep too since
    // 2026-11-29; the writers' escapes are what is tested here, so the array is marked as a
    // reader's that checked it (plan/checked-ids.ts), and planStep does not check it again.
    noteFieldsChecked(candidates);
    let rows = 0;
    for (const [budget, options] of [[{ rollouts: 24_000 }, {}], [{ tokens: 2_000_000 }, { skip: true, prefillWeight: 0.5 }]] as const) {
      const plan = planStep(a.snapshot(), candidates, budget, options, a.registries);
      const pretty = formatPlan(plan, 'json');
      const compact = planJsonCompact(plan);
      const jsonl = formatPlan(plan, 'jsonl');
      rows += plan.columns!.length;
      expect(pretty).toBe(reference(plan, true));
      expect(compact).toBe(reference(plan, false));
      expect(jsonl).toBe(formatPlan(plan, 'jsonl')); // now from the objects (planGroups)
    }
    expect(rows).toBeGreaterThan(4000);
  });

  it('texts kept across plans (a set per layout for the thread) give fresh bytes: compact or pretty first, small, regrown, small again', () => {
    const small = plans();
    const a = createAllocator();
    a.observe(Array.from({ length: 6000 }, (_, i) => ({ prompt_id: `r${i}`, step: 0, rewards: Array.from({ length: 1 + (i % 7) }, (_, j) => (j * i) % 3 === 0 ? 1 : 0) })));
    const big = a.plan(Array.from({ length: 6000 }, (_, i) => ({ id: `r${i}`, max_tokens: 100 * (i % 4) + 1 })), { rollouts: 30_000 }, { interval: 0.8 });
    // Every text written from the columns first: the reference reads `allocations`, which
    // switches the writers to the objects.
    const written: [Plan, string, string][] = [];
    for (const prettyFirst of [false, true, false]) {
      for (const plan of [...small, big, ...small]) {
        expect(plan.columns).toBeDefined();
        if (prettyFirst) {
          const pretty = formatPlan(plan, 'json');
          written.push([plan, pretty, planJsonCompact(plan)]);
        } else {
          const compact = planJsonCompact(plan);
          written.push([plan, formatPlan(plan, 'json'), compact]);
        }
      }
    }
    for (const [plan, pretty, compact] of written) {
      expect(pretty).toBe(reference(plan, true));
      expect(compact).toBe(reference(plan, false));
    }
    expect(written).toHaveLength(27);
    // Bounded: one set per layout, at most 2^16 slots, kept (not remade) for smaller plans.
    const large = rowTexts(true, 1e7, 0.9);
    release(large);
    expect(large.counts.bits).toBe(16);
    const first = rowTexts(true, 10, 0.9);
    expect(first).toBe(large);
    // A set in use is not shared: a second writer gets its own, not kept.
    const second = rowTexts(true, 10, 0.9);
    expect(second).not.toBe(large);
    release(first);
    release(second);
    expect(rowTexts(true, 10, 0.9)).toBe(large);
    release(large);
    const compact = rowTexts(false, 10, 0.9);
    release(compact);
    expect(compact).not.toBe(large);
  });

  it('write each plan\'s own interval: the same posteriors and values at another interval are written anew, not copied', () => {
    const a = createAllocator();
    a.observe(Array.from({ length: 300 }, (_, i) => ({ prompt_id: `v${i}`, step: 0, rewards: Array.from({ length: 2 + (i % 5) }, (_, j) => ((i + j) % 3 === 0 ? 1 : 0)) })));
    const candidates = Array.from({ length: 300 }, (_, i) => ({ id: `v${i}` }));
    // The same candidates and budget: the same (α, β, value) rows, only p_low and p_high differ.
    const texts = [0.9, 0.5, 0.5, 0.9].map((interval) => {
      const plan = a.plan(candidates, { rollouts: 2400 }, { interval });
      const written = [formatPlan(plan, 'json'), planJsonCompact(plan)] as const;
      expect(written[0]).toBe(reference(plan, true));
      expect(written[1]).toBe(reference(plan, false));
      return written[0];
    });
    expect(texts[1]).not.toBe(texts[0]);
    expect(texts[2]).toBe(texts[1]);
    expect(texts[3]).toBe(texts[0]);
  });

  it('write the right bytes when the numbers hardly repeat (the caches stop part-way), and on the next plan', () => {
    // A Thompson plan's values differ row by row; every prompt has its own max_tokens: past
    // 4,096 rows the caches of values (json) and counts (jsonl) stop (text-cache.ts).
    const a = createAllocator();
    a.observe(Array.from({ length: 500 }, (_, i) => ({ prompt_id: `t${i}`, step: 0, rewards: [i % 2, 1 - (i % 3 === 0 ? 1 : 0)] })));
    const candidates = Array.from({ length: 6000 }, (_, i) => ({ id: `t${i}`, max_tokens: 1000 + i }));
    const thompson = a.plan(candidates, { rollouts: 48_000 }, { policy: 'thompson', seed: 5 });
    const balanced = a.plan(candidates, { rollouts: 48_000 });
    const texts = [thompson, balanced, thompson].map((plan) => [formatPlan(plan, 'json'), planJsonCompact(plan), formatPlan(plan, 'jsonl')] as const);
    expect(new Set(thompson.allocations.map((r) => r.value)).size).toBeGreaterThan(4000);
    for (const [k, plan] of [thompson, balanced, thompson].entries()) {
      expect(texts[k]![0]).toBe(reference(plan, true));
      expect(texts[k]![1]).toBe(reference(plan, false));
      expect(texts[k]![2]).toBe(formatPlan(plan, 'jsonl')); // now from the objects (planGroups)
    }
  });

  it('write the right bytes when two writers of one layout interleave, or one is left unfinished', () => {
    const a = createAllocator();
    a.observe(Array.from({ length: 4000 }, (_, i) => ({ prompt_id: `s${i}`, step: 0, rewards: Array.from({ length: 1 + (i % 9) }, (_, j) => ((i + j) % 4 === 0 ? 1 : 0)) })));
    const candidates = (k: number) => Array.from({ length: 4000 }, (_, i) => ({ id: `s${(i * k) % 4000}-${k}`, max_tokens: 64 * (1 + (i % 3)) }));
    const [p1, p2] = [a.plan(candidates(1), { rollouts: 20_000 }), a.plan(candidates(7), { rollouts: 12_000 }, { interval: 0.5 })];
    const left = planChunks(p1!, 'json')[Symbol.iterator]();
    left.next(); // never finished: its set stays in use
    const [i1, i2] = [planChunks(p1!, 'json')[Symbol.iterator](), planChunks(p2!, 'json')[Symbol.iterator]()];
    const texts = ['', ''];
    let chunks = 0;
    for (let done = [false, false]; !done[0] || !done[1]; ) {
      for (const [k, it] of [i1, i2].entries()) {
        if (done[k]) continue;
        const r = it.next();
        if (r.done) done[k] = true;
        else texts[k] += chunkText(r.value);
        chunks++;
      }
    }
    expect(chunks).toBeGreaterThan(6);
    expect(texts[0]).toBe(reference(p1!, true));
    expect(texts[1]).toBe(reference(p2!, true));
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
