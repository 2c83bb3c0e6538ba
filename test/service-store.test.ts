import seedrandom from 'seedrandom';
import { afterAll, describe, expect, it } from 'vitest';
import { addEvidence, asyncStoreOf, batchOf, defaultDecay, NO_STEP, SqliteStore, type AsyncStore, type DecayOptions, type PromptState } from '../src/index.js';
import { openPg, pgUrl } from './service-helpers.js';

const decay: DecayOptions = { forgetPerStep: 0.9, reobserveDiscount: 0.8 };
const PG = pgUrl();

/** The same behaviour checks for every AsyncStore backend (registered as skipped with `skip`). */
function storeSuite(name: string, open: () => Promise<AsyncStore>, skip = false): void {
  describe.skipIf(skip)(`AsyncStore contract: ${name}`, () => {
    const opened: AsyncStore[] = [];
    const fresh = async () => {
      const s = await open();
      opened.push(s);
      return s;
    };
    afterAll(async () => {
      for (const s of opened) await s.close();
    });

    it('starts empty', async () => {
      const s = await fresh();
      expect(await s.count()).toBe(0);
      expect(await s.lastStep()).toBeNull();
      expect(await s.get('nope')).toBeUndefined();
      expect((await s.snapshot()).lastStep).toBeNull();
    });

    it('applies the decay rule for later, equal and late steps (figures by hand)', async () => {
      const s = await fresh();
      // (step, successes, failures) in arrival order: first, same step, later step, late result
      const seq: [number, number, number][] = [[3, 2, 1], [3, 1, 0], [7, 0, 3], [5, 1, 1]];
      let k = 0;
      for (const [step, succ, fail] of seq) {
        const results = [
          ...Array.from({ length: succ }, () => ({ prompt_id: 'p', step, reward: 1, rollout_id: `r${k++}` })),
          ...Array.from({ length: fail }, () => ({ prompt_id: 'p', step, reward: 0, rollout_id: `r${k++}` })),
        ];
        const summary = await s.apply(batchOf(results), decay);
        expect(summary.applied).toBe(succ + fail);
      }
      // λ = 0.9, ρ = 0.8. Step 3 twice: (3, 1). Step 7: old · 0.9⁴ · 0.8 = old · 0.52488, plus
      // (0, 3): (1.57464, 3.52488). Late step 5: new · 0.9² = new · 0.81: (2.38464, 4.33488).
      const got = (await s.get('p'))!;
      expect(got.successes).toBeCloseTo(2.38464, 12);
      expect(got.failures).toBeCloseTo(4.33488, 12);
      expect(got.lastStep).toBe(7);
      expect(got.rollouts).toBe(9);
      expect(got.rewardSum).toBe(4);
      expect(await s.lastStep()).toBe(7);
    });

    it('is idempotent by rollout_id, within a batch and across batches', async () => {
      const s = await fresh();
      const batch = batchOf([
        { prompt_id: 'a', step: 1, reward: 1, rollout_id: 'x1' },
        { prompt_id: 'a', step: 1, reward: 1, rollout_id: 'x1' },
        { prompt_id: 'b', step: 1, reward: 0, rollout_id: 'x2' },
      ]);
      expect(await s.apply(batch, decay)).toEqual({ applied: 2, duplicates: 1, aborted: 0, prompts: 2, last_step: 1 });
      const before = await s.get('a');
      expect(await s.apply(batch, decay)).toEqual({ applied: 0, duplicates: 3, aborted: 0, prompts: 0, last_step: 1 });
      expect(await s.get('a')).toEqual(before);
      expect(before!.successes).toBe(1);
    });

    it('does not mark aborted rollouts seen: a resumed rollout with the same id still counts', async () => {
      const s = await fresh();
      const aborted = await s.apply(batchOf([{ prompt_id: 'a', step: 0, reward: 0, finish_reason: 'abort', rollout_id: 'z' }]), decay);
      expect(aborted).toMatchObject({ applied: 0, aborted: 1 });
      expect(await s.get('a')).toBeUndefined();
      const resumed = await s.apply(batchOf([{ prompt_id: 'a', step: 0, reward: 1, rollout_id: 'z' }]), decay);
      expect(resumed).toMatchObject({ applied: 1, duplicates: 0 });
    });

    it('keys results without rollout_id by batch content, and defaults the step to last + 1', async () => {
      const s = await fresh();
      await s.apply(batchOf([{ prompt_id: 'a', step: 4, reward: 1 }]), decay);
      const b = batchOf([{ prompt_id: 'a', reward: 0, tokens: 50, group: 'g' }]);
      expect((await s.apply(b, decay)).last_step).toBe(5);
      expect((await s.apply(b, decay)).duplicates).toBe(1);
      const a = (await s.get('a'))!;
      expect(a.lastStep).toBe(5);
      expect(a.group).toBe('g');
      expect(a.successes).toBeCloseTo(1 * 0.9 * 0.8, 12);
      expect(a.failures).toBeCloseTo(1, 12);
      expect([a.wrongCount, a.wrongTokens, a.correctCount, a.correctTokens]).toEqual([1, 50, 0, 0]);
      const snap = await s.snapshot();
      expect(snap.lastStep).toBe(5);
      expect(snap.group('g')?.count).toBe(1);
      expect(await s.count()).toBe(1);
    });

    it('records a prompt\'s group and hint without touching evidence, idempotently (store/meta.ts)', async () => {
      const s = await fresh();
      await s.apply(batchOf([{ prompt_id: 'old', step: 3, reward: 1, tokens: 40, rollout_id: 'o1' }]), decay);
      const before = (await s.get('old'))!;
      await s.recordPrompts([
        { id: 'old', group: 'g', priorPassRate: 0.25, priorSamples: 16 },
        { id: 'new', group: 'h', priorPassRate: 0.5 },
      ]);
      const old = (await s.get('old'))!;
      expect(old).toMatchObject({ group: 'g', priorPassRate: 0.25, priorSamples: 16 });
      for (const k of ['successes', 'failures', 'lastStep', 'rollouts', 'rewardSum', 'correctCount', 'correctTokens'] as const) expect(old[k]).toBe(before[k]);
      const fresh1 = (await s.get('new'))!;
      expect(fresh1).toMatchObject({ group: 'h', priorPassRate: 0.5, successes: 0, failures: 0, rollouts: 0, lastStep: NO_STEP });
      expect(fresh1.priorSamples).toBeUndefined();
      // A planned-only prompt is no observed prompt: not counted, not in the pooled figures, no step.
      expect(await s.count()).toBe(1);
      const snap = await s.snapshot();
      expect(snap.lastStep).toBe(3);
      expect(snap.group('h')?.count ?? 0).toBe(0);
      expect(snap.hinted?.().map((x) => x.id)).toEqual(['old']);
      // Again: nothing changes. Without a hint or group: the stored ones stay.
      await s.recordPrompts([{ id: 'old', group: 'g', priorPassRate: 0.25, priorSamples: 16 }, { id: 'new' }]);
      expect(await s.get('old')).toEqual(old);
      expect(await s.get('new')).toEqual(fresh1);
      // A new hint replaces the old one with its samples (none given: none kept).
      await s.recordPrompts([{ id: 'old', priorPassRate: 0.75 }]);
      expect((await s.get('old'))!).toMatchObject({ group: 'g', priorPassRate: 0.75 });
      expect((await s.get('old'))!.priorSamples).toBeUndefined();
    });

    it('applies the first results of a planned-only prompt undiscounted, keeping its group and hint', async () => {
      const s = await fresh();
      await s.apply(batchOf([{ prompt_id: 'other', step: 7, reward: 1, rollout_id: 'x' }]), decay);
      await s.recordPrompts([{ id: 'p', group: 'g', priorPassRate: 0.1, priorSamples: 8 }]);
      // A late result (step 2, below the state's last step 7) for the planned prompt: no decay applies.
      const summary = await s.apply(batchOf([{ prompt_id: 'p', step: 2, rewards: [1, 0, 0] }]), decay);
      expect(summary).toMatchObject({ applied: 3, prompts: 1, last_step: 7 });
      const p = (await s.get('p'))!;
      expect(p).toMatchObject({ group: 'g', priorPassRate: 0.1, priorSamples: 8, lastStep: 2, rollouts: 3 });
      expect(p.successes).toBeCloseTo(1, 12);
      expect(p.failures).toBeCloseTo(2, 12);
      expect(await s.count()).toBe(2);
    });

    it('learns a hint from results lines; a line without one keeps it', async () => {
      const s = await fresh();
      await s.apply(batchOf([{ prompt_id: 'a', step: 1, reward: 1, group: 'g', prior_pass_rate: 0.3, prior_samples: 4, rollout_id: 'r1' }]), decay);
      expect((await s.get('a'))!).toMatchObject({ group: 'g', priorPassRate: 0.3, priorSamples: 4 });
      await s.apply(batchOf([{ prompt_id: 'a', step: 2, reward: 0, rollout_id: 'r2' }]), decay);
      expect((await s.get('a'))!).toMatchObject({ group: 'g', priorPassRate: 0.3, priorSamples: 4, rollouts: 2 });
      await s.apply(batchOf([{ prompt_id: 'a', step: 3, reward: 0, prior_pass_rate: 0.6, rollout_id: 'r3' }]), decay);
      const a = (await s.get('a'))!;
      expect(a.priorPassRate).toBe(0.6);
      expect(a.priorSamples).toBeUndefined();
    });

    it('decays across 200,000 steps, and at λ = 0.5 across 1,200, to what addEvidence gives (PostgreSQL raised "underflow")', async () => {
      const s = await fresh();
      const cases: [DecayOptions, [number, number][]][] = [
        [defaultDecay, [[0, 1], [200_000, 0], [200_001, 1]]],
        [{ forgetPerStep: 0.5, reobserveDiscount: 0.85 }, [[0, 1], [1_200, 1], [1_201, 0], [3_000, 1]]],
        [{ forgetPerStep: 0.5, reobserveDiscount: 1e-300 }, [[0, 1e-300], [1, 1e-300], [2, 1], [3, 0.5]]],
        [{ forgetPerStep: 0, reobserveDiscount: 0 }, [[5, 1], [3, 1], [9, 0.25]]],
        [{ forgetPerStep: 0.9, reobserveDiscount: 0.8 }, [[5_000, 1], [0, 1], [1, 0]]], // late results far behind
      ];
      let checked = 0;
      for (const [c, [d, seq]] of cases.entries()) {
        let ref = { successes: 0, failures: 0, lastStep: seq[0]![0] };
        for (const [step, reward] of seq) {
          const summary = await s.apply(batchOf([{ prompt_id: `u${c}`, step, reward, rollout_id: `u${c}-${step}` }]), d);
          expect(summary.applied).toBe(1);
          ref = addEvidence(d, ref, step, reward, 1 - reward);
        }
        const got = (await s.get(`u${c}`))!;
        expect(got.successes).toBeCloseTo(ref.successes, 12);
        expect(got.failures).toBeCloseTo(ref.failures, 12);
        checked++;
      }
      expect(checked).toBe(cases.length);
      expect((await s.get('u0'))!.successes).toBe(1); // the step-0 success is gone, without an error
    });

    it('never sees a NUL or a lone surrogate (refused by the shared field checks), and keeps other text exactly', async () => {
      const s = await fresh();
      for (const bad of [{ prompt_id: 'a\u0000' }, { prompt_id: 'a', rollout_id: '\u0000' }, { prompt_id: 'a', group: 'g\udc00' }]) {
        expect(() => batchOf([{ step: 0, reward: 1, ...bad }])).toThrow(/NUL|lone surrogate/);
      }
      const odd = ['tab\there', '\u0001ctl', 'emoji 🧮', 'rtl \u202e', 'quote\'s "x"', 'x'.repeat(5000)];
      await s.apply(batchOf(odd.map((id, k) => ({ prompt_id: id, step: 0, reward: 1, rollout_id: `odd-${k}-\u0007`, group: id }))), decay);
      for (const id of odd) {
        const got = await s.get(id);
        expect(got?.id).toBe(id);
        expect(got?.group).toBe(id);
      }
      expect(await s.count()).toBe(odd.length);
    });

    it('applies a batch spanning several steps in step order whatever the line order', async () => {
      const s = await fresh();
      await s.apply(batchOf([
        { prompt_id: 'a', step: 9, reward: 1, rollout_id: 'late' },
        { prompt_id: 'a', step: 2, reward: 0, rollout_id: 'early' },
      ]), decay);
      // Step 2 first: (0, 1); then step 9: (0, 1) · 0.9⁷ · 0.8 + (1, 0) = (1, 0.38263752).
      const a = (await s.get('a'))!;
      expect(a.successes).toBeCloseTo(1, 12);
      expect(a.failures).toBeCloseTo(0.38263752, 12);
    });
  });
}

storeSuite('sqlite', async () => asyncStoreOf(new SqliteStore(':memory:')));
storeSuite('postgres', () => openPg(PG!), PG === undefined);

describe.runIf(PG !== undefined)('PostgreSQL store under concurrent writers', () => {
  it('matches SQLite on the same random sequence of batches', async () => {
    const pg = await openPg(PG!);
    const lite = asyncStoreOf(new SqliteStore(':memory:'));
    const rng = seedrandom('pg-vs-sqlite');
    let applied = 0;
    for (let b = 0; b < 30; b++) {
      const step = Math.floor(rng() * 20);
      const results = Array.from({ length: 1 + Math.floor(rng() * 12) }, (_, j) => ({
        prompt_id: `p${Math.floor(rng() * 6)}`,
        step: rng() < 0.2 ? undefined : step + Math.floor(rng() * 3),
        reward: Math.round(rng() * 4) / 4,
        tokens: 10 + Math.floor(rng() * 500),
        rollout_id: rng() < 0.1 ? `dup${j}` : `b${b}-${j}`,
        ...(rng() < 0.3 ? { group: `g${Math.floor(rng() * 2)}` } : {}),
        ...(rng() < 0.2 ? { prior_pass_rate: Math.round(rng() * 8) / 8, ...(rng() < 0.5 ? { prior_samples: 8 } : {}) } : {}),
      }));
      if (rng() < 0.3) {
        // A plan's metadata record between batches, for prompts seen or not.
        const meta = Array.from({ length: 3 }, () => ({
          id: `p${Math.floor(rng() * 8)}`, ...(rng() < 0.5 ? { group: `g${Math.floor(rng() * 2)}` } : {}), ...(rng() < 0.7 ? { priorPassRate: rng() } : {}),
        }));
        await pg.recordPrompts(meta);
        await lite.recordPrompts(meta);
      }
      const batch = batchOf(results);
      const x = await pg.apply(batch, decay);
      const y = await lite.apply(batch, decay);
      expect(x).toEqual(y);
      applied += x.applied;
    }
    const a = await pg.snapshot();
    const b = await lite.snapshot();
    expect(a.lastStep).toBe(b.lastStep);
    expect(await pg.count()).toBe(await lite.count());
    for (let i = 0; i < 8; i++) {
      const p = a.get(`p${i}`);
      const q = b.get(`p${i}`);
      expect(p === undefined).toBe(q === undefined);
      if (p === undefined || q === undefined) continue;
      for (const k of ['successes', 'failures', 'rewardSum', 'correctTokens', 'wrongTokens'] as const) expect(p[k]).toBeCloseTo(q[k], 9);
      for (const k of ['lastStep', 'rollouts', 'correctCount', 'wrongCount', 'group', 'priorPassRate', 'priorSamples'] as const) expect(p[k]).toBe(q[k]);
    }
    console.log(`pg vs sqlite: 30 random batches, ${applied} rollouts applied, states equal`);
    expect(applied).toBeGreaterThan(50);
    await pg.close();
    await lite.close();
  });

  it('loses nothing when 8 writers (separate connections) update the same prompts at once, and decays once', async () => {
    const url = PG!;
    const seedStore = await openPg(url);
    await seedStore.apply(batchOf([{ prompt_id: 'hot', step: 10, reward: 1, rollout_id: 'seed-1' }, { prompt_id: 'hot', step: 10, reward: 0, rollout_id: 'seed-2' }]), decay);
    const schemaUrl = (seedStore as unknown as { url: string }).url;
    const writers = await Promise.all(Array.from({ length: 8 }, () => import('../src/index.js').then((m) => m.PostgresStore.connect(schemaUrl))));
    const perWriter = 25;
    let sentS = 0;
    let sentF = 0;
    const jobs: Promise<unknown>[] = [];
    writers.forEach((w, wi) => {
      const batches = Array.from({ length: perWriter }, (_, k) => {
        const r = (wi + k) % 4 / 4; // dyadic rewards: sums are exact in floating point
        sentS += r + 1;
        sentF += 1 - r;
        return batchOf([
          { prompt_id: 'hot', step: 13, reward: r, rollout_id: `w${wi}-${k}-a` },
          { prompt_id: 'hot', step: 13, reward: 1, rollout_id: `w${wi}-${k}-b` },
          { prompt_id: 'hot', step: 13, reward: 0, rollout_id: `w${wi}-${k}-b` }, // repeat key: a duplicate
        ]);
      });
      jobs.push((async () => {
        for (const b of batches) await w.apply(b, decay);
      })());
      // every writer also re-sends its first batch concurrently: idempotent
      jobs.push(w.apply(batches[0]!, decay));
    });
    const t0 = performance.now();
    await Promise.all(jobs);
    const ms = performance.now() - t0;
    const hot = (await seedStore.get('hot'))!;
    const k = Math.pow(0.9, 3) * 0.8;
    expect(hot.rollouts).toBe(2 + 8 * perWriter * 2);
    expect(hot.successes).toBeCloseTo(1 * k + sentS, 9);
    expect(hot.failures).toBeCloseTo(1 * k + sentF, 9);
    expect(hot.lastStep).toBe(13);
    console.log(`pg concurrency: 8 writers × ${perWriter} batches (+8 resent) in ${ms.toFixed(0)} ms; rollouts ${hot.rollouts}, successes ${hot.successes.toFixed(6)} (expected ${(k + sentS).toFixed(6)})`);
    for (const w of writers) await w.close();
    await seedStore.close();
  });
});
