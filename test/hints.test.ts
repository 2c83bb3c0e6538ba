import seedrandom from 'seedrandom';
import { describe, expect, it } from 'vitest';
import {
  betaDraw, defaultPriorOptions, fitHints, hintLogit, hintPriors, posteriors, priorFor, snapshotOf, defaultHintPool,
  type Prior, type PromptState,
} from '../src/index.js';

const logit = (p: number) => Math.log(p / (1 - p));
const sigmoid = (z: number) => 1 / (1 + Math.exp(-z));

function normal(random: () => number): number {
  return Math.sqrt(-2 * Math.log(1 - random())) * Math.cos(2 * Math.PI * random());
}

/** An observed prompt: `k` of `n` rollouts right, with hint `h` from `samples` reference rollouts. */
function observed(id: string, k: number, n: number, h: number, samples?: number, group: string | null = null): PromptState {
  return {
    id, group, successes: k, failures: n - k, lastStep: 0, rollouts: n, rewardSum: k, correctCount: 0, correctTokens: 0, wrongCount: 0, wrongTokens: 0,
    priorPassRate: h, ...(samples === undefined ? {} : { priorSamples: samples }),
  };
}

function binomial(n: number, p: number, random: () => number): number {
  let k = 0;
  for (let j = 0; j < n; j++) if (random() < p) k++;
  return k;
}

/**
 * A pool whose true pass rates follow the hint: p ~ Beta(m·S, (1 − m)·S) around
 * m = σ(a + b·logit h), each observed with `n` rollouts. Hints are exact (no samples) unless given.
 */
function pool(seed: string, size: number, o: { a: number; b: number; strength: number; n: number; hintSamples?: number }): PromptState[] {
  const random = seedrandom(seed);
  return Array.from({ length: size }, (_, i) => {
    const z = logit(Math.min(0.98, Math.max(0.02, betaDraw(0.5, 0.7, random))));
    const h = sigmoid(z);
    const m = sigmoid(o.a + o.b * z);
    const p = o.strength === Infinity ? m : betaDraw(m * o.strength, (1 - m) * o.strength, random);
    const shown = o.hintSamples === undefined ? h : binomial(o.hintSamples, h, random) / o.hintSamples;
    return observed(`p${i}`, binomial(o.n, p, random), o.n, shown, o.hintSamples);
  });
}

const fitOf = (states: PromptState[]) => fitHints(states, defaultHintPool, 30)!;

describe('hint calibration (posterior/hint-fit.ts)', () => {
  it('recovers the intercept and slope of a known logit-linear map (no residual spread)', () => {
    // True map: p = σ(−1 + 0.5·logit h), every prompt seen 8 times; the fit is centred at x̄.
    const states = pool('exact', 4000, { a: -1, b: 0.5, strength: Infinity, n: 8 });
    const fit = fitOf(states);
    expect(fit.b).toBeCloseTo(0.5, 1);
    expect(fit.a - fit.b * fit.center).toBeCloseTo(-1, 1);
    expect(Math.sqrt(fit.varB)).toBeLessThan(0.05);
    // No spread beyond the binomial one: the strength is far above any clamp.
    expect(fit.strength).toBeGreaterThan(50);
  });

  it('measures the residual spread as a Beta strength, corrected for binomial noise', () => {
    for (const strength of [3, 10]) {
      const fit = fitOf(pool(`spread-${strength}`, 6000, { a: 0, b: 1, strength, n: 8 }));
      expect(fit.b).toBeGreaterThan(0.8);
      expect(fit.b).toBeLessThan(1.2);
      // Moments of 8-rollout rates: within a third of the true strength.
      expect(fit.strength, `true strength ${strength}`).toBeGreaterThan(strength * 0.67);
      expect(fit.strength, `true strength ${strength}`).toBeLessThan(strength * 1.5);
    }
  });

  it('shrinks a hint from few samples toward the pool, barely one from many', () => {
    const pool4 = { mean: 0.4, strength: 2 };
    // 0 of 4: (0 + 0.8)/(4 + 2) = 0.133; 0 of 64: 0.8/66 = 0.0121; exact 0: clamped to 0.01.
    expect(sigmoid(hintLogit(0, 4, pool4))).toBeCloseTo(0.8 / 6, 10);
    expect(sigmoid(hintLogit(0, 64, pool4))).toBeCloseTo(0.8 / 66, 10);
    expect(sigmoid(hintLogit(0, undefined, pool4))).toBeCloseTo(0.01, 10);
  });

  it('a perfect hint (0/8 hints all 0 of 8, 8/8 hints all 8 of 8: complete separation) is trusted, not ignored', () => {
    // The logistic fit has no maximum there: its weights vanished, the slope's standard error
    // reached ~155 and the trust 0, so the best possible hint was ignored (every new prompt at
    // p_mean 0.5), where one stray success gave trust 0.98.
    const states = Array.from({ length: 200 }, (_, i) => (i % 2 === 0 ? observed(`z${i}`, 0, 8, 0, 8, 'G') : observed(`o${i}`, 8, 8, 1, 8, 'G')));
    const hp = hintPriors(snapshotOf(states), defaultPriorOptions);
    const c = hp.calibration('G');
    expect(c.source).toBe('group');
    expect(c.trust).toBeGreaterThan(0.9);
    const learned = priorFor(snapshotOf(states), 'G', defaultPriorOptions);
    const mean = (p: { alpha: number; beta: number }) => p.alpha / (p.alpha + p.beta);
    expect(mean(hp.prior('G', 0, 8, learned))).toBeLessThan(0.05);
    expect(mean(hp.prior('G', 1, 8, learned))).toBeGreaterThan(0.95);
    // Not separated, still no maximum: every hint of 1 right 8 of 8, one hint-0 prompt 1 of 8 (a
    // review found trust 0 again there); and a hint-0 prompt all right.
    for (const [name, data] of [
      ['a stray success on one side', states.map((st) => (st.id === 'z0' ? observed('z0', 1, 8, 0, 8, 'G') : st))],
      ['a hint-0 prompt right 8 of 8', [...states, observed('t', 8, 8, 0, 8, 'G')]],
    ] as const) {
      const near = hintPriors(snapshotOf([...data]), defaultPriorOptions);
      expect(near.calibration('G').trust, name).toBeGreaterThan(0.5);
      const prior = priorFor(snapshotOf([...data]), 'G', defaultPriorOptions);
      expect(mean(near.prior('G', 0, 8, prior)), name).toBeLessThan(mean(near.prior('G', 1, 8, prior)) - 0.5);
    }
  });

  it('a constant hint (no variation) fits a zero slope with no trust', () => {
    const random = seedrandom('constant');
    const states = Array.from({ length: 100 }, (_, i) => observed(`c${i}`, binomial(8, 0.3, random), 8, 0.5));
    const fit = fitOf(states);
    expect(fit.b).toBe(0);
    const hp = hintPriors(snapshotOf(states), defaultPriorOptions);
    expect(hp.calibration(null).trust).toBe(0);
  });
});

describe('hinted priors (posterior/hints.ts)', () => {
  const learnedOf = (states: PromptState[]): Prior => priorFor(snapshotOf(states), null, defaultPriorOptions);

  it('a useless hint collapses to the learned prior: pure-noise hints over 20 seeds', () => {
    let collapsed = 0;
    for (let seed = 0; seed < 20; seed++) {
      const random = seedrandom(`noise-${seed}`);
      // Pass rates independent of the hints.
      const states = Array.from({ length: 600 }, (_, i) => {
        const p = betaDraw(0.35, 0.7, random);
        return observed(`n${i}`, binomial(8, p, random), 8, random());
      });
      const learned = learnedOf(states);
      const hp = hintPriors(snapshotOf(states), defaultPriorOptions);
      const trust = hp.calibration(null).trust;
      expect(trust, `seed ${seed}`).toBeLessThan(0.6);
      for (const h of [0, 0.1, 0.5, 0.9, 1]) {
        const prior = hp.prior(null, h, undefined, learned);
        const mean = prior.alpha / (prior.alpha + prior.beta);
        expect(Math.abs(mean - learned.alpha / (learned.alpha + learned.beta)), `seed ${seed}, hint ${h}`).toBeLessThan(0.06);
        if (trust === 0) expect(prior).toEqual(learned);
      }
      if (trust === 0) collapsed++;
    }
    // The slope is within two standard errors of 0 about 95% of the time.
    expect(collapsed).toBeGreaterThanOrEqual(16);
  });

  it('a biased hint is corrected: the prior follows the observed map, not the hint at face value', () => {
    // The trained model is much weaker than the reference: p = σ(−2 + 0.6·logit h).
    const states = pool('biased', 3000, { a: -2, b: 0.6, strength: 6, n: 8 });
    const hp = hintPriors(snapshotOf(states), defaultPriorOptions);
    const learned = learnedOf(states);
    expect(hp.calibration(null).trust).toBeGreaterThan(0.9);
    for (const h of [0.1, 0.5, 0.9]) {
      const prior = hp.prior(null, h, undefined, learned);
      const mean = prior.alpha / (prior.alpha + prior.beta);
      const truth = sigmoid(-2 + 0.6 * logit(h));
      expect(Math.abs(mean - truth), `hint ${h}: prior mean ${mean}, true mean ${truth}`).toBeLessThan(0.05);
    }
  });

  it('a good hint is worth more pseudo-rollouts than a noisy one, and never more than hintMaxStrength', () => {
    const good = hintPriors(snapshotOf(pool('good', 3000, { a: 0, b: 1, strength: 30, n: 8 })), defaultPriorOptions);
    const noisy = hintPriors(snapshotOf(pool('noisy', 3000, { a: 0, b: 1, strength: 2, n: 8 })), defaultPriorOptions);
    const flat: Prior = { alpha: 0.5, beta: 0.5, source: 'all' };
    const worth = (hp: typeof good) => {
      const p = hp.prior(null, 0.5, undefined, flat);
      return p.alpha + p.beta;
    };
    expect(worth(good)).toBeGreaterThan(2 * worth(noisy));
    expect(worth(good)).toBeLessThanOrEqual(defaultPriorOptions.hintMaxStrength + 1e-9);
  });

  it('without calibration data a hint counts as hintDefaultStrength pseudo-rollouts on the learned prior', () => {
    const hp = hintPriors(snapshotOf([]), defaultPriorOptions);
    expect(hp.calibration('any').source).toBe('default');
    const learned: Prior = { alpha: 1, beta: 1, source: 'flat' };
    const p = hp.prior('any', 0.25, undefined, learned);
    expect(p.alpha).toBeCloseTo(1 + 2 * 0.25, 12);
    expect(p.beta).toBeCloseTo(1 + 2 * 0.75, 12);
  });

  it('calibrates per group with enough prompts, else on the pool', () => {
    const a = pool('group-a', 200, { a: 1.5, b: 0.8, strength: 8, n: 8 }).map((s) => ({ ...s, id: `a/${s.id}`, group: 'a' }));
    const b = pool('group-b', 200, { a: -1.5, b: 0.8, strength: 8, n: 8 }).map((s) => ({ ...s, id: `b/${s.id}`, group: 'b' }));
    const c = pool('group-c', 10, { a: 0, b: 0.8, strength: 8, n: 8 }).map((s) => ({ ...s, id: `c/${s.id}`, group: 'c' }));
    const hp = hintPriors(snapshotOf([...a, ...b, ...c]), defaultPriorOptions);
    expect(hp.calibration('a').source).toBe('group');
    expect(hp.calibration('b').source).toBe('group');
    expect(hp.calibration('c').source).toBe('all');
    const flat: Prior = { alpha: 1, beta: 1, source: 'flat' };
    const mean = (g: string) => {
      const p = hp.prior(g, 0.5, undefined, flat);
      return p.alpha / (p.alpha + p.beta);
    };
    // The same hint means an easier prompt in group a than in group b.
    expect(mean('a')).toBeGreaterThan(0.7);
    expect(mean('b')).toBeLessThan(0.3);
  });
});

describe('posteriors with hints', () => {
  const decay = { forgetPerStep: 1, reobserveDiscount: 1 };
  it('takes the candidate\'s hint, else the one the state remembers; evidence adds on top', () => {
    const states = pool('post', 500, { a: 0, b: 1, strength: 20, n: 8 });
    const known: PromptState = { ...observed('known', 0, 0, 0.9), successes: 0, failures: 0, rollouts: 0, lastStep: -1 };
    const seen: PromptState = observed('seen', 1, 8, 0.9);
    const snapshot = snapshotOf([...states, known, seen]);
    const opts = { decay, prior: defaultPriorOptions };
    const { alpha, beta } = posteriors(snapshot, [{ id: 'new' }, { id: 'new-hinted', prior_pass_rate: 0.9 }, { id: 'known' }, { id: 'seen' }], 1, opts);
    const mean = (i: number) => alpha[i]! / (alpha[i]! + beta[i]!);
    expect(mean(1)).toBeGreaterThan(mean(0) + 0.2);
    // 'known' was recorded with hint 0.9 and no evidence: the same prior as the hinted candidate.
    expect(alpha[2]).toBeCloseTo(alpha[1]!, 12);
    expect(beta[2]).toBeCloseTo(beta[1]!, 12);
    // 'seen': the same prior plus 1 success and 7 failures.
    expect(alpha[3]).toBeCloseTo(alpha[1]! + 1, 12);
    expect(beta[3]).toBeCloseTo(beta[1]! + 7, 12);
  });

  it('rejects a library caller\'s bad hint with the candidate and field named', () => {
    const snapshot = snapshotOf([]);
    const opts = { decay, prior: defaultPriorOptions };
    expect(() => posteriors(snapshot, [{ id: 'a' }, { id: 'b', prior_pass_rate: 1.5 }], 0, opts)).toThrow(/candidate 2: "prior_pass_rate" must be a number in \[0, 1\].*got 1\.5/);
    expect(() => posteriors(snapshot, [{ id: 'a', prior_samples: 4 }], 0, opts)).toThrow(/"prior_samples" needs "prior_pass_rate"/);
  });
});
