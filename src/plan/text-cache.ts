/**
 * A direct-mapped cache of texts keyed by up to three doubles (formatted numbers of a plan
 * row, which repeat: posteriors built from small counts), in typed arrays: a fixed 2^bits
 * slots, a collision overwrites. Keys compare with ===, so a caller's text must depend on the
 * numbers only through what === tells apart (String(-0) and String(0) are both "0"); NaN
 * never matches.
 */
export class TextCache {
  private readonly keys: Float64Array;
  private readonly texts: string[];
  private readonly mask: number;
  private readonly bits = new Float64Array(3);
  private readonly words = new Uint32Array(this.bits.buffer);
  private slot = 0;

  constructor(bits: number) {
    const size = 1 << bits;
    this.mask = size - 1;
    this.keys = new Float64Array(3 * size).fill(NaN);
    this.texts = new Array<string>(size).fill('');
  }

  /** The text kept for (x, y, z), or undefined: then put() keeps one for them. */
  get(x: number, y: number, z: number): string | undefined {
    const b = this.bits;
    b[0] = x;
    b[1] = y;
    b[2] = z;
    const w = this.words;
    let h = Math.imul(w[0]! ^ w[1]!, 0x9e3779b1);
    h = Math.imul(h ^ w[2]! ^ w[3]! ^ (h >>> 15), 0x85ebca6b);
    h = Math.imul(h ^ w[4]! ^ w[5]! ^ (h >>> 13), 0xc2b2ae35);
    const s = (h ^ (h >>> 16)) & this.mask;
    const k = 3 * s;
    const keys = this.keys;
    if (keys[k] === x && keys[k + 1] === y && keys[k + 2] === z) return this.texts[s];
    this.slot = s;
    return undefined;
  }

  /** Keeps `text` for the numbers of the last get() that missed; returns it. */
  put(text: string): string {
    const s = this.slot;
    const b = this.bits;
    this.keys[3 * s] = b[0]!;
    this.keys[3 * s + 1] = b[1]!;
    this.keys[3 * s + 2] = b[2]!;
    this.texts[s] = text;
    return text;
  }
}
