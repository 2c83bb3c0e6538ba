/**
 * Where a policy's rollouts went: generated groups and their rollouts by pass rate, in equal-width
 * bins, once by the pass rate that defines "hard" (the true rate in simulation, the logged rate
 * pooled over neighbouring visits in replay) and once by the policy's own prediction when it
 * makes one. The report draws the mean group size per bin (rollouts / groups).
 */
export interface SpendBins {
  /** Bin b holds pass rates in [b/bins, (b+1)/bins); the last bin includes 1. */
  readonly bins: number;
  readonly byRate: { readonly groups: number[]; readonly rollouts: number[] };
  /** All zero for a policy without a predictor. */
  readonly byPredicted: { readonly groups: number[]; readonly rollouts: number[] };
}

/** Accumulates SpendBins group by group. O(1) a group, O(bins) memory. */
export class SpendRecorder {
  private readonly spend: SpendBins;

  constructor(readonly bins = 20) {
    const zeros = () => new Array<number>(bins).fill(0);
    this.spend = { bins, byRate: { groups: zeros(), rollouts: zeros() }, byPredicted: { groups: zeros(), rollouts: zeros() } };
  }

  private bin(p: number): number {
    return Math.min(this.bins - 1, Math.max(0, Math.floor(p * this.bins)));
  }

  /** One generated group of `n` rollouts; `predicted` undefined or non-finite when the policy made no prediction. */
  add(n: number, rate: number, predicted: number | undefined): void {
    if (Number.isFinite(rate)) {
      const b = this.bin(rate);
      this.spend.byRate.groups[b]!++;
      this.spend.byRate.rollouts[b]! += n;
    }
    if (predicted !== undefined && Number.isFinite(predicted)) {
      const b = this.bin(predicted);
      this.spend.byPredicted.groups[b]!++;
      this.spend.byPredicted.rollouts[b]! += n;
    }
  }

  summary(): SpendBins {
    const copy = (x: { groups: number[]; rollouts: number[] }) => ({ groups: [...x.groups], rollouts: [...x.rollouts] });
    return { bins: this.bins, byRate: copy(this.spend.byRate), byPredicted: copy(this.spend.byPredicted) };
  }
}
