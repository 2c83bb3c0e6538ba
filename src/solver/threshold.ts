/** Sampled moves: log of value per unit cost, rollouts and tokens of each; the first `count` hold. */
export interface SampledMoves {
  readonly logRatios: Float64Array;
  readonly costR: Float64Array;
  readonly costT: Float64Array;
  readonly count: number;
}

/**
 * The ratio at which the sampled moves, best first, run out of `limitR` rollouts or `limitT`
 * tokens (the budget left, scaled to the sample): the cumulative cost over a histogram of
 * 4,096 log-ratio buckets, O(count). The threshold is the upper edge of the bucket where the
 * budget runs out, so every move above it sits in a bucket that fit. NaN when every sampled
 * move fits.
 */
export function ratioWhereBudgetRunsOut(sample: SampledMoves, limitR: number, limitT: number): number {
  const { logRatios, costR, costT, count } = sample;
  let lo = Infinity;
  let hi = -Infinity;
  for (let k = 0; k < count; k++) {
    const x = logRatios[k]!;
    if (x < lo) lo = x;
    if (x > hi) hi = x;
  }
  const buckets = 4096;
  const width = (hi - lo) / buckets || 1;
  const sumR = new Float64Array(buckets + 1);
  const sumT = new Float64Array(buckets + 1);
  for (let k = 0; k < count; k++) {
    const b = Math.min(buckets, Math.floor((logRatios[k]! - lo) / width));
    sumR[b] = sumR[b]! + costR[k]!;
    sumT[b] = sumT[b]! + costT[k]!;
  }
  let accR = 0;
  let accT = 0;
  for (let b = buckets; b >= 0; b--) {
    accR += sumR[b]!;
    accT += sumT[b]!;
    if (accR > limitR || accT > limitT) return Math.exp(lo + (b + 1) * width);
  }
  return NaN;
}
