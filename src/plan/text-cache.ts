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
  private readonly key = new Float64Array(3);
  private readonly words = new Uint32Array(this.key.buffer);
  private slot = 0;

  /** `bits`: log2 of the number of slots. */
  constructor(readonly bits: number) {
    const size = 1 << bits;
    this.mask = size - 1;
    this.keys = new Float64Array(3 * size).fill(NaN);
    this.texts = new Array<string>(size).fill('');
  }

  /** The text kept for (x, y, z), or undefined: then put() keeps one for them. */
  get(x: number, y: number, z: number): string | undefined {
    const b = this.key;
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
    const b = this.key;
    this.keys[3 * s] = b[0]!;
    this.keys[3 * s + 1] = b[1]!;
    this.keys[3 * s + 2] = b[2]!;
    this.texts[s] = text;
    return text;
  }
}

/** The text caches of a plan writer's row fields: counts (n, max_tokens), posteriors, values. */
export interface RowTexts {
  readonly counts: TextCache;
  readonly posteriors: TextCache;
  readonly values: TextCache;
}

/** Kept for the thread, one set per layout (pretty, compact): their texts hold the field names. */
const kept = new Map<boolean, RowTexts>();

/**
 * Row text caches for a plan of `rows` rows written `pretty` or compact, kept for the thread:
 * a cached text is a pure function of its numbers and the layout, so a service's plans reuse
 * the texts of earlier plans (same bytes). Bounded: two sets of 2^12 to 2^16 slots, a set
 * replaced by a larger one when a larger plan needs more slots.
 */
export function rowTexts(pretty: boolean, rows: number): RowTexts {
  const bits = Math.min(16, Math.max(12, Math.ceil(Math.log2(rows + 1))));
  let texts = kept.get(pretty);
  if (texts === undefined || texts.counts.bits < bits) {
    texts = { counts: new TextCache(bits), posteriors: new TextCache(bits), values: new TextCache(bits) };
    kept.set(pretty, texts);
  }
  return texts;
}
