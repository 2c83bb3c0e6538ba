/**
 * ln Γ, the regularized incomplete beta function and its inverse, as jStat 1.9.6 computes
 * them (jstat/dist/jstat.js `gammaln`, `betacf`, `ibeta`, `ibetainv`; MIT licence, © 2013
 * jStat), line for line, so plans keep their exact numbers; here so that a plan does not load
 * the whole jStat library (~40 ms of a command's start). The algorithms are Numerical
 * Recipes' (Press et al., 3rd ed., §6.1 gammln, §6.4 betacf/incbeta/invbetai). A test checks
 * equal bits against jStat on random arguments.
 */

const LANCZOS = [76.18009172947146, -86.50532032941677, 24.01409824083091, -1.231739572450155, 0.1208650973866179e-2, -0.5395239384953e-5];

/** ln Γ(x), x > 0: Lanczos' series with six terms (relative error ~2e-10 near small x, ~1e-15 beyond). O(1). */
export function gammaln(x: number): number {
  let ser = 1.000000000190015;
  let y = x;
  const xx = x;
  let tmp = x + 5.5;
  tmp -= (xx + 0.5) * Math.log(tmp);
  for (let j = 0; j < 6; j++) ser += LANCZOS[j]! / ++y;
  return Math.log((2.5066282746310005 * ser) / xx) - tmp;
}

/** The continued fraction of the incomplete beta function (modified Lentz), at most 100 steps. */
function betacf(x: number, a: number, b: number): number {
  const fpmin = 1e-30;
  const qab = a + b;
  const qap = a + 1;
  const qam = a - 1;
  let c = 1;
  let d = 1 - (qab * x) / qap;
  if (Math.abs(d) < fpmin) d = fpmin;
  d = 1 / d;
  let h = d;
  for (let m = 1; m <= 100; m++) {
    const m2 = 2 * m;
    let aa = (m * (b - m) * x) / ((qam + m2) * (a + m2));
    d = 1 + aa * d;
    if (Math.abs(d) < fpmin) d = fpmin;
    c = 1 + aa / c;
    if (Math.abs(c) < fpmin) c = fpmin;
    d = 1 / d;
    h *= d * c;
    aa = (-(a + m) * (qab + m) * x) / ((a + m2) * (qap + m2));
    d = 1 + aa * d;
    if (Math.abs(d) < fpmin) d = fpmin;
    c = 1 + aa / c;
    if (Math.abs(c) < fpmin) c = fpmin;
    d = 1 / d;
    const del = d * c;
    h *= del;
    if (Math.abs(del - 1.0) < 3e-7) break;
  }
  return h;
}

/** I_x(a, b), the regularized incomplete beta function; x in [0, 1], a, b > 0 (NaN outside [0, 1]). */
export function ibeta(x: number, a: number, b: number): number {
  return ibetaFrom(x, a, b, gammaln(a + b) - gammaln(a) - gammaln(b));
}

/**
 * ibeta with its x-free term, `front` = lnΓ(a+b) − lnΓ(a) − lnΓ(b) summed in that order (so
 * the same bits), given: ibetainv's steps share one (three ln Γ a step fewer).
 */
function ibetaFrom(x: number, a: number, b: number, front: number): number {
  const bt = x === 0 || x === 1 ? 0 : Math.exp(front + a * Math.log(x) + b * Math.log(1 - x));
  if (x < 0 || x > 1) return NaN;
  if (x < (a + 1) / (a + b + 2)) return (bt * betacf(x, a, b)) / a;
  return 1 - (bt * betacf(1 - x, b, a)) / b;
}

/**
 * The x with I_x(a, b) = p: a first guess (Abramowitz & Stegun 26.5.22 for a, b ≥ 1, else
 * the tails' power laws), then at most 10 Halley steps to a relative 1e-8. O(1).
 */
export function ibetainv(p: number, a: number, b: number): number {
  return ibetainvWith(p, a, b, lnGammas(a, b));
}

/** [lnΓ(a), lnΓ(b), lnΓ(a+b)]: what ibetainv's steps need of a and b alone. */
export function lnGammas(a: number, b: number): readonly [number, number, number] {
  return [gammaln(a), gammaln(b), gammaln(a + b)];
}

/** ibetainv with lnGammas(a, b) given: two quantiles of one Beta share them. */
export function ibetainvWith(p: number, a: number, b: number, [lnA, lnB, lnAB]: readonly [number, number, number]): number {
  const EPS = 1e-8;
  const a1 = a - 1;
  const b1 = b - 1;
  let x: number;
  let t: number;
  if (p <= 0) return 0;
  if (p >= 1) return 1;
  if (a >= 1 && b >= 1) {
    const pp = p < 0.5 ? p : 1 - p;
    t = Math.sqrt(-2 * Math.log(pp));
    x = (2.30753 + t * 0.27061) / (1 + t * (0.99229 + t * 0.04481)) - t;
    if (p < 0.5) x = -x;
    const al = (x * x - 3) / 6;
    const h = 2 / (1 / (2 * a - 1) + 1 / (2 * b - 1));
    const w = (x * Math.sqrt(al + h)) / h - (1 / (2 * b - 1) - 1 / (2 * a - 1)) * (al + 5 / 6 - 2 / (3 * h));
    x = a / (a + b * Math.exp(2 * w));
  } else {
    const lna = Math.log(a / (a + b));
    const lnb = Math.log(b / (a + b));
    t = Math.exp(a * lna) / a;
    const u = Math.exp(b * lnb) / b;
    const w = t + u;
    if (p < t / w) x = Math.pow(a * w * p, 1 / a);
    else x = 1 - Math.pow(b * w * (1 - p), 1 / b);
  }
  const afac = -lnA - lnB + lnAB;
  const front = lnAB - lnA - lnB;
  for (let j = 0; j < 10; j++) {
    if (x === 0 || x === 1) return x;
    const err = ibetaFrom(x, a, b, front) - p;
    t = Math.exp(a1 * Math.log(x) + b1 * Math.log(1 - x) + afac);
    const u = err / t;
    x -= t = u / (1 - 0.5 * Math.min(1, u * (a1 / x - b1 / (1 - x))));
    if (x <= 0) x = 0.5 * (x + t);
    if (x >= 1) x = 0.5 * (x + t + 1);
    if (Math.abs(t) < EPS * x && j > 0) break;
  }
  return x;
}
