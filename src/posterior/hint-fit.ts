import type { PromptState } from './state.js';

/**
 * The calibration of offline difficulty hints against observed pass rates (empirical Bayes;
 * posterior/hints.ts turns it into priors). A hint h is a reference model's pass rate, often
 * from another (weaker or stronger) model and from a few samples, so it is evidence of unknown
 * reliability: how it maps to the trained model's pass rate is learned from the prompts already
 * observed that carried one.
 *
 * The model, in logit space (a logit-normal calibration; Efron, "Large-Scale Inference", 2010,
 * ch. 1 and 11, for the empirical Bayes reading; McCullagh & Nelder, "Generalized Linear
 * Models", 1989, §4 and §9, for the fit):
 *   logit p_i = a + b·(x_i − x̄) + ε_i,  ε_i of spread τ,  x_i = logit h̃_i,
 * where h̃_i is the hint shrunk for its own sampling noise: with prior_samples k_i,
 * h̃ = (h·k + m_h·S_h)/(k + S_h), (m_h, S_h) the Beta fitted to all observed hints by the
 * method of moments corrected for binomial noise (Efron & Morris 1975's shrinkage of rates:
 * a 0/4 hint moves toward the pool, a 0/64 one barely); without prior_samples the hint is
 * taken as exact, clamped to [0.01, 0.99].
 *
 * Fit: the mean σ(a + b(x − x̄)) by iteratively reweighted least squares on each prompt's
 * observed rate r_i = s_i/n_i (quasi-binomial, unbiased at rates of 0 and 1 where empirical
 * logits are not), with the weights of a beta-binomial, w_i = n_i(1 + S)/(n_i + S), so a
 * prompt observed 400 times does not outweigh 50 observed once. The residual spread τ, as the
 * strength S of a Beta around the fitted mean, comes from the method of moments corrected for
 * binomial noise: Σ(r − m)² = t·Σm(1 − m) + (1 − t)·Σm(1 − m)/n, t = 1/(1 + S) (the same
 * correction as the learned prior, posterior/prior.ts). Two rounds: weights from the plain
 * spread of the rates, then from the residual one. The uncertainty of (a, b) is the
 * quasi-likelihood covariance φ·(XᵀWX)⁻¹, φ = max(1, Pearson χ²/(N − 2)).
 *
 * O(N·iterations) for N observed hinted prompts (at most 2 × 25 passes; typically 2 × 6).
 */
export interface HintFit {
  /** Observed hinted prompts the fit used. */
  readonly prompts: number;
  /** Centre x̄ of the logit hints (weighted), intercept a and slope b of the mean. */
  readonly center: number;
  readonly a: number;
  readonly b: number;
  /** Sampling variances and covariance of a and b. */
  readonly varA: number;
  readonly varB: number;
  readonly covAB: number;
  /** Strength (α + β) of the Beta of pass rates around the fitted mean: the residual spread. */
  readonly strength: number;
}

/** The Beta of the hints themselves, for shrinking a hint by its sample count. */
export interface HintPool {
  readonly mean: number;
  readonly strength: number;
}

/** Without enough hints with sample counts: add half a success and half a failure (Jeffreys). */
export const defaultHintPool: HintPool = { mean: 0.5, strength: 1 };

const MAX_STRENGTH = 1e6;
const logit = (p: number) => Math.log(p / (1 - p));
const sigmoid = (z: number) => 1 / (1 + Math.exp(-z));

/** Method of moments over hints with sample counts (binomial noise removed); undefined with fewer than `min`. O(N). */
export function fitHintPool(states: readonly PromptState[], min: number): HintPool | undefined {
  let count = 0;
  let sum = 0;
  let sum2 = 0;
  let noise = 0;
  for (const s of states) {
    if (s.priorPassRate === undefined || s.priorSamples === undefined) continue;
    const h = s.priorPassRate;
    count++;
    sum += h;
    sum2 += h * h;
    noise += (h * (1 - h)) / s.priorSamples;
  }
  if (count < min) return undefined;
  const mean = Math.min(0.99, Math.max(0.01, sum / count));
  const trueVar = sum2 / count - (sum / count) ** 2 - noise / count;
  const strength = trueVar > 1e-9 ? Math.max(0.1, (mean * (1 - mean)) / trueVar - 1) : MAX_STRENGTH;
  return { mean, strength };
}

/** logit h̃: the hint shrunk for its sampling noise (see above). Domain: h ∈ [0, 1], samples ≥ 1 or undefined. O(1). */
export function hintLogit(h: number, samples: number | undefined, pool: HintPool): number {
  const shrunk = samples === undefined ? h : (h * samples + pool.mean * pool.strength) / (samples + pool.strength);
  const lo = samples === undefined ? 0.01 : 1e-4;
  return logit(Math.min(1 - lo, Math.max(lo, shrunk)));
}

/** t = 1/(1 + S) from Σ(r − m)², Σ m(1 − m), Σ m(1 − m)/n (see above), as a strength S. */
function strengthOf(resid: number, spread: number, noise: number): number {
  if (spread - noise <= 1e-12) return MAX_STRENGTH;
  const t = (resid - noise) / (spread - noise);
  if (t <= 1 / (1 + MAX_STRENGTH)) return MAX_STRENGTH;
  return t >= 1 ? 0 : 1 / t - 1;
}

/**
 * Fits the calibration to observed hinted prompts (`states`: each with a hint and evidence).
 * Undefined with fewer than `min` prompts. See the comment above for the model.
 */
export function fitHints(states: readonly PromptState[], pool: HintPool, min: number): HintFit | undefined {
  const size = states.length;
  if (size < min) return undefined;
  const x = new Float64Array(size);
  const r = new Float64Array(size);
  const n = new Float64Array(size);
  for (let i = 0; i < size; i++) {
    const s = states[i]!;
    n[i] = s.successes + s.failures;
    r[i] = s.successes / n[i]!;
    x[i] = hintLogit(s.priorPassRate!, s.priorSamples, pool);
  }
  // Separation (every rate 0 or 1 and a hint threshold splitting them; or data whose fit runs
  // off to a clamp without converging, as one level of hints all right does): the logistic fit
  // has no maximum, its weights vanish and the slope's variance blows up, so the best hint there
  // is (0/8 hints all 0/8, 8/8 hints all 8/8) got trust 0 and was ignored, where one stray
  // success on each side gave trust 0.96. Such rates are fitted as (s + 1/N)/(n + 2/N) for N
  // prompts: one success and one failure in all, spread evenly, as Firth's (1993) penalty adds
  // for a fit of two parameters (halves of the leverages, which sum to 2), which keeps the fit
  // finite and steep. Any other data is fitted as it is.
  const plain = separated(x, r) ? undefined : roundsOf(x, r, n);
  if (plain !== undefined && plain.converged) return { ...plain.fit, prompts: size, strength: plain.strength };
  for (let i = 0; i < size; i++) r[i] = (states[i]!.successes + 1 / size) / (n[i]! + 2 / size);
  const adjusted = roundsOf(x, r, n);
  return { ...adjusted.fit, prompts: size, strength: adjusted.strength };
}

/** The two rounds of fitHints on rates r: the fit, the residual strength, and whether the last IRLS converged within its clamps. */
function roundsOf(x: Float64Array, r: Float64Array, n: Float64Array): { fit: Omit<HintFit, 'prompts' | 'strength'>; strength: number; converged: boolean } {
  const size = x.length;
  let rate = 0;
  for (let i = 0; i < size; i++) rate += r[i]!;
  // Round 1: the spread of the rates around their mean; round 2: around the fitted means.
  const m0 = Math.min(0.99, Math.max(0.01, rate / size));
  let resid = 0;
  let noise = 0;
  for (let i = 0; i < size; i++) {
    resid += (r[i]! - m0) ** 2;
    noise += (m0 * (1 - m0)) / n[i]!;
  }
  let strength = strengthOf(resid, size * m0 * (1 - m0), noise);
  let fit = irls(x, r, n, strength);
  for (let round = 0; round < 2; round++) {
    let spread = 0;
    resid = 0;
    noise = 0;
    for (let i = 0; i < size; i++) {
      const m = sigmoid(fit.a + fit.b * (x[i]! - fit.center));
      resid += (r[i]! - m) ** 2;
      spread += m * (1 - m);
      noise += (m * (1 - m)) / n[i]!;
    }
    strength = strengthOf(resid, spread, noise);
    if (round === 0) fit = irls(x, r, n, strength);
  }
  const { converged, ...rest } = fit;
  return { fit: rest, strength, converged };
}

/**
 * Whether the rates are all 0 or 1, both occur, and the hints split them: every hint of a 1
 * above every hint of a 0, or below. O(N).
 */
function separated(x: Float64Array, r: Float64Array): boolean {
  let lo0 = Infinity;
  let hi0 = -Infinity;
  let lo1 = Infinity;
  let hi1 = -Infinity;
  for (let i = 0; i < x.length; i++) {
    if (r[i] === 0) {
      lo0 = Math.min(lo0, x[i]!);
      hi0 = Math.max(hi0, x[i]!);
    } else if (r[i] === 1) {
      lo1 = Math.min(lo1, x[i]!);
      hi1 = Math.max(hi1, x[i]!);
    } else return false;
  }
  if (lo0 === Infinity || lo1 === Infinity) return false;
  return hi0 < lo1 || hi1 < lo0;
}

/**
 * Quasi-binomial logistic regression of r on x with prior weights n(1 + S)/(n + S), by IRLS,
 * with x centred at its weighted mean. A tiny ridge keeps a constant x (every hint the same)
 * solvable: b = 0 with a huge variance. O(N) a pass, at most 25 passes.
 */
type IrlsFit = Omit<HintFit, 'prompts' | 'strength'> & { readonly converged: boolean };

function irls(x: Float64Array, r: Float64Array, n: Float64Array, strength: number): IrlsFit {
  const size = x.length;
  const w = Float64Array.from(n, (ni) => (strength >= MAX_STRENGTH ? ni : (ni * (1 + strength)) / (ni + strength)));
  let sw = 0;
  let swx = 0;
  let swr = 0;
  for (let i = 0; i < size; i++) {
    sw += w[i]!;
    swx += w[i]! * x[i]!;
    swr += w[i]! * r[i]!;
  }
  const center = swx / sw;
  const mean = Math.min(0.999, Math.max(0.001, swr / sw));
  let a = logit(mean);
  let b = 0;
  let s00 = 0;
  let s01 = 0;
  let s11 = 0;
  let converged = false;
  for (let iter = 0; iter < 25; iter++) {
    let t0 = 0;
    let t1 = 0;
    s00 = 0;
    s01 = 0;
    s11 = 0;
    for (let i = 0; i < size; i++) {
      const xc = x[i]! - center;
      const eta = a + b * xc;
      const m = sigmoid(eta);
      const v = Math.max(1e-9, m * (1 - m));
      const wi = w[i]! * v;
      const z = eta + (r[i]! - m) / v;
      s00 += wi;
      s01 += wi * xc;
      s11 += wi * xc * xc;
      t0 += wi * z;
      t1 += wi * z * xc;
    }
    s11 += 1e-9 * s00;
    const det = s00 * s11 - s01 * s01;
    const na = Math.max(-12, Math.min(12, (s11 * t0 - s01 * t1) / det));
    const nb = Math.max(-20, Math.min(20, (s00 * t1 - s01 * t0) / det));
    const done = Math.abs(na - a) + Math.abs(nb - b) < 1e-9;
    a = na;
    b = nb;
    if (done) {
      converged = Math.abs(a) < 12 && Math.abs(b) < 20;
      break;
    }
  }
  // Pearson dispersion of the final fit, floored at 1 (quasi-likelihood).
  let chi2 = 0;
  for (let i = 0; i < size; i++) {
    const m = sigmoid(a + b * (x[i]! - center));
    chi2 += (w[i]! * (r[i]! - m) ** 2) / Math.max(1e-9, m * (1 - m));
  }
  const phi = Math.max(1, size > 2 ? chi2 / (size - 2) : 1);
  const det = s00 * s11 - s01 * s01;
  return { center, a, b, varA: (phi * s11) / det, varB: (phi * s00) / det, covAB: (-phi * s01) / det, converged };
}
