import { gammaln, ibetainv, ibetainvWith, lnGammas } from './incomplete-beta.js';

/** ln Γ(x), x > 0 (Lanczos, jStat's gammaln: math/incomplete-beta.ts; relative error ~1e-15). */
export function lgamma(x: number): number {
  return gammaln(x);
}

/** ln B(a, b) = lnΓ(a) + lnΓ(b) − lnΓ(a+b), a, b > 0. Log space, so no underflow for large a, b. */
export function logBeta(a: number, b: number): number {
  return lgamma(a) + lgamma(b) - lgamma(a + b);
}

/**
 * E[p^a (1−p)^b] for p ~ Beta(α, β) = B(α+a, β+b) / B(α, β), computed in log space.
 * Domain: α, β > 0; a, b ≥ 0. O(1). Source: the Beta moment identity (e.g. Johnson, Kotz &
 * Balakrishnan, Continuous Univariate Distributions vol. 2, ch. 25).
 */
export function betaMoment(alpha: number, beta: number, a: number, b: number): number {
  if (a === 0 && b === 0) return 1;
  return Math.exp(logBeta(alpha + a, beta + b) - logBeta(alpha, beta));
}

/**
 * Quantile of Beta(α, β) at probability q, jStat's beta.inv (Halley steps on the regularized
 * incomplete beta, math/incomplete-beta.ts; accurate to ~1e-8). Domain: α, β > 0, q in [0, 1] (0 and 1 at the ends).
 * About 1.4 µs a call.
 */
export function betaQuantile(q: number, alpha: number, beta: number): number {
  return ibetainv(q, alpha, beta);
}

/** Standard normal quantile (Acklam's rational approximation, |error| < 1.2e-9). Domain: q in (0, 1) (±∞ at the ends gives NaN). O(1). */
export function normalQuantile(q: number): number {
  const a = [-39.69683028665376, 220.9460984245205, -275.9285104469687, 138.357751867269, -30.66479806614716, 2.506628277459239];
  const b = [-54.47609879822406, 161.5858368580409, -155.6989798598866, 66.80131188771972, -13.28068155288572];
  const c = [-0.007784894002430293, -0.3223964580411365, -2.400758277161838, -2.549732539343734, 4.374664141464968, 2.938163982698783];
  const d = [0.007784695709041462, 0.3224671290700398, 2.445134137142996, 3.754408661907416];
  const lo = 0.02425;
  if (q < lo) {
    const t = Math.sqrt(-2 * Math.log(q));
    return (((((c[0]! * t + c[1]!) * t + c[2]!) * t + c[3]!) * t + c[4]!) * t + c[5]!) / ((((d[0]! * t + d[1]!) * t + d[2]!) * t + d[3]!) * t + 1);
  }
  if (q > 1 - lo) return -normalQuantile(1 - q);
  const u = q - 0.5;
  const r = u * u;
  return ((((((a[0]! * r + a[1]!) * r + a[2]!) * r + a[3]!) * r + a[4]!) * r + a[5]!) * u) / (((((b[0]! * r + b[1]!) * r + b[2]!) * r + b[3]!) * r + b[4]!) * r + 1);
}

/** Digamma ψ and its next three derivatives by their asymptotic series; error < 1e-6 for x ≥ 2. */
function polygammas(x: number): [number, number, number, number] {
  const i1 = 1 / x;
  const i2 = i1 * i1;
  const i3 = i2 * i1;
  const i4 = i2 * i2;
  const i5 = i4 * i1;
  const i6 = i3 * i3;
  const i7 = i6 * i1;
  return [
    Math.log(x) - 0.5 * i1 - i2 / 12 + i4 / 120 - i6 / 252,
    i1 + 0.5 * i2 + i3 / 6 - i5 / 30 + i7 / 42,
    -i2 - i3 - 0.5 * i4 + i6 / 6,
    2 * i3 + 3 * i4 + 2 * i5 - i7,
  ];
}

/**
 * A Beta quantile cheap enough for a million prompts a plan. For α, β ≥ 5 it is the
 * Cornish–Fisher expansion, to the fourth cumulant, of logit(p), whose cumulants are exact:
 * κ1 = ψ(α) − ψ(β), κ2 = ψ1(α) + ψ1(β), κ3 = ψ2(α) − ψ2(β), κ4 = ψ3(α) + ψ3(β) (ψk the
 * polygamma functions; logit(p) is a difference of log-Gammas, Johnson, Kotz & Balakrishnan,
 * ch. 25). Absolute error under 1e-3 there (the tests check it against jStat on random α, β);
 * below that, and at q = 0 or 1, it calls the exact `betaQuantile`. Domain: α, β > 0, q in
 * [0, 1]. O(1).
 */
export function betaQuantileFast(q: number, alpha: number, beta: number): number {
  // q = 0 or 1 (the plan option interval = 1): the expansion's normal quantile is ±∞ there and
  // gave NaN (p_low and p_high null in the plan file); the exact quantile is 0 or 1.
  if (alpha < 5 || beta < 5 || !(q > 0 && q < 1)) return betaQuantile(q, alpha, beta);
  return cornishFisher(q, cumulants(alpha, beta));
}

/** logit(p)'s mean, standard deviation and scaled third and fourth cumulants for Beta(α, β). */
function cumulants(alpha: number, beta: number): { mean: number; sd: number; g1: number; g2: number } {
  const [da, ta, ua, va] = polygammas(alpha);
  const [db, tb, ub, vb] = polygammas(beta);
  const k2 = ta + tb;
  const sd = Math.sqrt(k2);
  return { mean: da - db, sd, g1: (ua - ub) / (k2 * sd), g2: (va + vb) / (k2 * k2) };
}

/** betaQuantileFast's expansion at q for cumulants(α, β). */
function cornishFisher(q: number, { mean, sd, g1, g2 }: { mean: number; sd: number; g1: number; g2: number }): number {
  const z = normalQuantile(q);
  const w = z + ((z * z - 1) * g1) / 6 + ((z * z * z - 3 * z) * g2) / 24 - ((2 * z * z * z - 5 * z) * g1 * g1) / 36;
  return 1 / (1 + Math.exp(-(mean + sd * w)));
}

/**
 * [betaQuantileFast(q, α, β), betaQuantileFast(1 − q, α, β)], the same bits, sharing what the
 * two have in common (the polygammas, or the exact quantile's ln Γ of α, β and α + β): a
 * plan's interval. O(1).
 */
export function betaIntervalFast(q: number, alpha: number, beta: number): [number, number] {
  if (alpha < 5 || beta < 5 || !(q > 0 && q < 1)) {
    const ln = lnGammas(alpha, beta);
    return [ibetainvWith(q, alpha, beta, ln), ibetainvWith(1 - q, alpha, beta, ln)];
  }
  const c = cumulants(alpha, beta);
  return [cornishFisher(q, c), cornishFisher(1 - q, c)];
}

/** A uniform random source on [0, 1): injected everywhere randomness is used. */
export type Random = () => number;

/** Standard normal draw by Box–Muller. */
function normalDraw(random: Random): number {
  let u = random();
  while (u <= 0) u = random();
  return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * random());
}

/**
 * Gamma(shape, 1) draw. Marsaglia & Tsang (2000), "A simple method for generating gamma
 * variables", ACM TOMS 26(3); shape < 1 by the boost Gamma(k) = Gamma(k+1)·U^(1/k).
 * Domain: shape > 0. Expected O(1): the squeeze accepts most tries, and a try is accepted with
 * probability of about 0.95 or more for every shape ≥ 1 (as the paper reports).
 */
export function gammaDraw(shape: number, random: Random): number {
  if (shape < 1) {
    let u = random();
    while (u <= 0) u = random();
    return gammaDraw(shape + 1, random) * Math.pow(u, 1 / shape);
  }
  const d = shape - 1 / 3;
  const c = 1 / Math.sqrt(9 * d);
  for (;;) {
    let x: number;
    let v: number;
    do {
      x = normalDraw(random);
      v = 1 + c * x;
    } while (v <= 0);
    v = v * v * v;
    const u = random();
    if (u < 1 - 0.0331 * x * x * x * x) return d * v;
    if (Math.log(u) < 0.5 * x * x + d * (1 - v + Math.log(v))) return d * v;
  }
}

/**
 * Beta(α, β) draw as X/(X+Y) with X ~ Gamma(α), Y ~ Gamma(β) (the standard construction,
 * e.g. Devroye 1986, "Non-Uniform Random Variate Generation", IX.4). Domain: α, β > 0.
 * Expected O(1) (two gammaDraw calls).
 */
export function betaDraw(alpha: number, beta: number, random: Random): number {
  const x = gammaDraw(alpha, random);
  const y = gammaDraw(beta, random);
  const s = x + y;
  return s > 0 ? x / s : alpha / (alpha + beta);
}
