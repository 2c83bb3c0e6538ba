/**
 * A direct-mapped cache of f(a, b) → [x, y] for pairs of doubles, in typed arrays: a fixed
 * 2^bits entries (32 bytes each), a collision overwrites. For expensive pure functions whose
 * arguments repeat (Beta quantiles of posteriors built from small counts).
 */
export class PairCache {
  private readonly keyA: Float64Array;
  private readonly keyB: Float64Array;
  private readonly valX: Float64Array;
  private readonly valY: Float64Array;
  private readonly mask: number;
  private readonly key = new Float64Array(2);
  private readonly words = new Uint32Array(this.key.buffer);

  constructor(
    private readonly compute: (a: number, b: number) => [number, number],
    /** log2 of the number of entries. */
    readonly bits = 16,
  ) {
    const size = 1 << bits;
    this.mask = size - 1;
    this.keyA = new Float64Array(size).fill(NaN);
    this.keyB = new Float64Array(size).fill(NaN);
    this.valX = new Float64Array(size);
    this.valY = new Float64Array(size);
  }

  private slot(a: number, b: number): number {
    this.key[0] = a;
    this.key[1] = b;
    const w = this.words;
    let h = Math.imul(w[0]! ^ w[1]!, 0x9e3779b1);
    h = Math.imul(h ^ w[2]! ^ (h >>> 15), 0x85ebca6b);
    h = Math.imul(h ^ w[3]! ^ (h >>> 13), 0xc2b2ae35);
    return (h ^ (h >>> 16)) & this.mask;
  }

  /** f(a, b), from the cache when the same pair was seen last in its slot. */
  get(a: number, b: number, out: [number, number]): [number, number] {
    const s = this.slot(a, b);
    if (this.keyA[s] === a && this.keyB[s] === b) {
      out[0] = this.valX[s]!;
      out[1] = this.valY[s]!;
      return out;
    }
    const [x, y] = this.compute(a, b);
    this.keyA[s] = a;
    this.keyB[s] = b;
    this.valX[s] = x;
    this.valY[s] = y;
    out[0] = x;
    out[1] = y;
    return out;
  }
}
