import { badInput, quote } from '../errors.js';
import { defaultHintPool, fitHintPool, fitHints, hintLogit, type HintFit, type HintPool } from './hint-fit.js';
import type { Prior, PriorOptions } from './prior.js';
import type { PromptState, StateSnapshot } from './state.js';

/**
 * The prior of a prompt that carries an offline hint: the learned prior (posterior/prior.ts)
 * moved toward what the hint predicts, by as much as the calibration has earned
 * (posterior/hint-fit.ts for the fit and its sources).
 *
 * Which calibration: the prompt's group's own, when the group has at least
 * `prior.hintMinPrompts` observed hinted prompts; else the pooled one over all observed
 * hinted prompts, when there are that many; else the cautious default below.
 *
 * From a calibration (a, b, spread S, uncertainty of a and b) and the hint's logit x:
 * - what the hint predicts: mean m_h = σ(η), η = a + b(x − x̄); variance of p
 *   V = m_h(1 − m_h)/(S + 1) (the residual spread) + (m_h(1 − m_h))²·Var(η) (the fit's own
 *   uncertainty, by the delta method); as a Beta, strength S_h = m_h(1 − m_h)/V − 1, clamped to
 *   [prior.minStrength, prior.hintMaxStrength]: how many rollouts the hint is worth;
 * - how far to trust it: f = max(0, 1 − 4·Var(b)/b²), the positive-part empirical Bayes
 *   shrinkage of the slope toward 0 (Efron & Morris 1973) at two standard errors: 0 for a hint
 *   whose slope is within two standard errors of 0 (a useless hint), near 1 for a slope many
 *   standard errors from 0;
 * - the prior: mean (1 − f)·m_0 + f·m_h, strength (1 − f)·S_0 + f·S_h, with (m_0, S_0) the
 *   learned prior's. A useless hint (f = 0) leaves exactly the learned prior; a biased one
 *   (a ≠ 0, b ≠ 1) is corrected by the fitted a and b; a noisy one has a large residual spread
 *   and so a small S_h.
 *
 * Cautious default (no calibration yet, e.g. the first step): the learned prior plus the hint
 * at face value as `prior.hintDefaultStrength` pseudo-rollouts (α_0 + w·h̃, β_0 + w·(1 − h̃)),
 * so an unknown hint moves a new prompt's estimate no more than one or two of its rollouts would.
 */
export interface HintCalibration {
  readonly source: 'group' | 'all' | 'default';
  /** The fit (absent for the default). */
  readonly fit?: HintFit;
  /** Trust in the hint, f ∈ [0, 1] (above). */
  readonly trust: number;
}

/** The hint calibrations of one snapshot, fitted on first use per group and kept. */
export interface HintPriors {
  /** The prior of a prompt of `group` with hint `h` (from `samples` rollouts, if known), given its learned prior. O(1) after the group's fit. */
  prior(group: string | null, h: number, samples: number | undefined, learned: Prior): Prior;
  /** The calibration a prompt of `group` gets (inspect, tests). */
  calibration(group: string | null): HintCalibration;
}

const sigmoid = (z: number) => 1 / (1 + Math.exp(-z));

/**
 * Checks a candidate's (or results line's) hint fields and returns them: `prior_pass_rate` a
 * number in [0, 1], `prior_samples` a positive integer that needs `prior_pass_rate`; both
 * optional. Throws BAD_INPUT naming `where`, the field and the value. One check for prompts
 * files, service requests, results and library callers (io/jsonl.ts `field.hint`, the planner).
 */
export function checkHint(where: string, obj: Record<string, unknown>): { prior_pass_rate?: number; prior_samples?: number } {
  const rate = obj.prior_pass_rate;
  if (rate !== undefined && (typeof rate !== 'number' || !(rate >= 0 && rate <= 1))) {
    throw badInput(where, `"prior_pass_rate" must be a number in [0, 1] (leave it out when there is no hint), got ${quote(rate)}`);
  }
  const samples = obj.prior_samples;
  if (samples !== undefined && (typeof samples !== 'number' || !Number.isSafeInteger(samples) || samples < 1)) {
    throw badInput(where, `"prior_samples" must be a positive integer, got ${quote(samples)}`);
  }
  if (samples !== undefined && rate === undefined) throw badInput(where, `"prior_samples" needs "prior_pass_rate", got prior_samples ${quote(samples)} alone`);
  return { ...(rate === undefined ? {} : { prior_pass_rate: rate as number }), ...(samples === undefined ? {} : { prior_samples: samples as number }) };
}

/**
 * The trust f of a fit: positive-part shrinkage of the slope at two standard errors,
 * f = max(0, 1 − 4·Var(b)/b²) (the positive-part James–Stein factor, Efron & Morris 1973, for one
 * coefficient with the threshold at z = 2): 0 for a slope within two standard errors of 0, near 1
 * for a slope known well. Domain: a fit with finite variance (else 0). O(1).
 */
export function trustOf(fit: HintFit): number {
  if (fit.b === 0 || !Number.isFinite(fit.varB)) return 0;
  return Math.max(0, 1 - (4 * fit.varB) / (fit.b * fit.b));
}

/** Hint priors for a snapshot; fits are computed lazily per group. */
export function hintPriors(snapshot: StateSnapshot, opts: PriorOptions): HintPriors {
  let hinted: readonly PromptState[] | undefined;
  let pool: HintPool | undefined;
  let pooled: HintCalibration | undefined;
  const byGroup = new Map<string, HintCalibration>();
  const data = () => (hinted ??= snapshot.hinted?.() ?? []);
  const poolOf = () => (pool ??= fitHintPool(data(), opts.hintMinPrompts) ?? defaultHintPool);
  const calibrate = (states: readonly PromptState[], source: 'group' | 'all'): HintCalibration | undefined => {
    const fit = fitHints(states, poolOf(), opts.hintMinPrompts);
    return fit === undefined ? undefined : { source, fit, trust: trustOf(fit) };
  };
  const pooledCalibration = () => (pooled ??= calibrate(data(), 'all') ?? { source: 'default', trust: 0 });
  const calibration = (group: string | null): HintCalibration => {
    if (group === null) return pooledCalibration();
    let c = byGroup.get(group);
    if (c === undefined) {
      c = calibrate(data().filter((s) => s.group === group), 'group') ?? pooledCalibration();
      byGroup.set(group, c);
    }
    return c;
  };
  return {
    calibration,
    prior(group, h, samples, learned) {
      const c = calibration(group);
      const x = hintLogit(h, samples, poolOf());
      if (c.fit === undefined) {
        const w = opts.hintDefaultStrength;
        const shrunk = sigmoid(x);
        return { alpha: learned.alpha + w * shrunk, beta: learned.beta + w * (1 - shrunk), source: 'hint' };
      }
      if (c.trust === 0) return learned;
      const f = c.fit;
      const xc = x - f.center;
      const m = sigmoid(f.a + f.b * xc);
      const mv = m * (1 - m);
      const varEta = f.varA + xc * xc * f.varB + 2 * xc * f.covAB;
      const variance = mv / (f.strength + 1) + mv * mv * Math.max(0, varEta);
      const raw = variance > 0 ? mv / variance - 1 : opts.hintMaxStrength;
      const strength = Math.min(opts.hintMaxStrength, Math.max(opts.minStrength, raw));
      const s0 = learned.alpha + learned.beta;
      const m0 = learned.alpha / s0;
      const mean = Math.min(0.995, Math.max(0.005, (1 - c.trust) * m0 + c.trust * m));
      const total = (1 - c.trust) * s0 + c.trust * strength;
      return { alpha: mean * total, beta: (1 - mean) * total, source: 'hint' };
    },
  };
}

/** One calibration in words and numbers, for `inspect` and GET /v1/prompts. */
export interface CalibrationSummary {
  readonly group: string | null;
  readonly source: HintCalibration['source'];
  /** Observed hinted prompts fitted on (0 for the default). */
  readonly prompts: number;
  /** The fitted map: logit p ≈ intercept + slope·logit h̃, and its trust f. */
  readonly intercept: number | null;
  readonly slope: number | null;
  readonly slope_se: number | null;
  readonly trust: number;
  /** Pseudo-rollouts the residual spread makes a hint worth (before the fit's own uncertainty and the clamp). */
  readonly residual_strength: number | null;
}

/**
 * The calibration of every group that has observed hinted prompts, and the pooled one (group
 * null). O(N) for N observed hinted prompts.
 */
export function calibrationSummary(snapshot: StateSnapshot, opts: PriorOptions): CalibrationSummary[] {
  const hp = hintPriors(snapshot, opts);
  const groups = [...new Set((snapshot.hinted?.() ?? []).map((s) => s.group).filter((g): g is string => g !== null))].sort();
  return [null, ...groups].map((group) => {
    const c = hp.calibration(group);
    const f = c.fit;
    const round = (x: number) => Math.round(x * 1e4) / 1e4;
    return {
      group,
      source: c.source,
      prompts: f?.prompts ?? 0,
      intercept: f === undefined ? null : round(f.a - f.b * f.center),
      slope: f === undefined ? null : round(f.b),
      slope_se: f === undefined ? null : round(Math.sqrt(f.varB)),
      trust: round(c.trust),
      residual_strength: f === undefined ? null : round(Math.min(f.strength, 1e6)),
    };
  });
}
