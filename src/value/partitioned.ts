import type { ValueCurves } from './types.js';

/**
 * Value curves of N prompts assembled from parts, each part the curves of some of the prompts
 * (e.g. one per kind of group already generated this step, each with its own conditional
 * value). Prompt i is item `local[i]` of part `partOf[i]`. Every call forwards: O(1) on top
 * of the part's cost.
 */
export class PartitionedCurves implements ValueCurves {
  readonly size: number;
  walkGain = NaN; // written before it is read; NaN, not 0, for the reason in MonomialCurves
  walkNext = NaN;

  constructor(
    private readonly parts: readonly ValueCurves[],
    private readonly partOf: Uint16Array,
    private readonly local: Int32Array,
  ) {
    this.size = partOf.length;
  }

  private part(i: number): ValueCurves {
    return this.parts[this.partOf[i]!]!;
  }

  value(i: number, n: number): number {
    return this.part(i).value(this.local[i]!, n);
  }

  seek(i: number, n: number): number {
    return this.part(i).seek(this.local[i]!, n);
  }

  nextGain(i: number): number {
    return this.part(i).nextGain(this.local[i]!);
  }

  advance(i: number): void {
    this.part(i).advance(this.local[i]!);
  }

  cursorOf(i: number): number {
    return this.part(i).cursorOf(this.local[i]!);
  }

  current(i: number): number {
    return this.part(i).current(this.local[i]!);
  }

  /** The part's fast path when it has one, else the nextGain → advance loop it stands for. */
  advanceWhile(i: number, unitCost: number, lambda: number, maxN: number): number {
    const part = this.part(i);
    const j = this.local[i]!;
    if (part.advanceWhile !== undefined) {
      const taken = part.advanceWhile(j, unitCost, lambda, maxN);
      this.walkGain = part.walkGain!;
      this.walkNext = part.walkNext!;
      return taken;
    }
    let taken = 0;
    let total = 0;
    let next = NaN;
    while (part.cursorOf(j) < maxN) {
      const g = part.nextGain(j);
      if (!((unitCost > 0 ? g / unitCost : g > 0 ? Infinity : 0) > lambda)) {
        next = g;
        break;
      }
      total += g;
      part.advance(j);
      taken++;
    }
    this.walkGain = total;
    this.walkNext = next;
    return taken;
  }
}
