import { ByteChunk } from './byte-chunk.js';

/**
 * A direct-mapped cache of ASCII texts keyed by up to three doubles (formatted numbers of a
 * plan row, which repeat: posteriors built from small counts), in typed arrays: a fixed 2^bits
 * slots, a collision overwrites. The texts are kept in a ByteChunk's arena and written by
 * copying them into its chunk. Keys compare with ===, so a caller's text must depend on the
 * numbers only through what === tells apart (String(-0) and String(0) are both "0"); NaN
 * never matches. A writer's numbers that hardly repeat (a Thompson plan's values, a file whose
 * every prompt has its own max_tokens) would only churn the arena: once a writer's use
 * (begin()) has made TRIAL lookups or more and found under a quarter of them, reuse() misses at
 * once and nothing more is kept, for the rest of that use. The bytes are the same either way.
 */
export class TextCache {
  private readonly keys: Float64Array;
  /** Each slot's text: its offset in the chunk's arena and its length. */
  private readonly starts: Int32Array;
  private readonly lengths: Int32Array;
  private readonly mask: number;
  private readonly key = new Float64Array(3);
  private readonly words = new Uint32Array(this.key.buffer);
  private slot = 0;
  /** Where the chunk ended when reuse() missed. */
  private from = 0;
  /** The chunk's generation the slots were kept in (older texts were dropped from its arena). */
  private generation: number;
  /** Lookups and texts found since begin(); `off` once too few were found. */
  private lookups = 0;
  private found = 0;
  private off = false;

  /** `bits`: log2 of the number of slots. */
  constructor(readonly bits: number, private readonly chunk: ByteChunk) {
    const size = 1 << bits;
    this.mask = size - 1;
    this.keys = new Float64Array(3 * size).fill(NaN);
    this.starts = new Int32Array(size);
    this.lengths = new Int32Array(size);
    this.generation = chunk.generation;
  }

  /** The slot whose text is kept for (x, y, z), or -1: then put() keeps one for them. */
  get(x: number, y: number, z: number): number {
    if (this.generation !== this.chunk.generation) this.clear();
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
    if (keys[k] === x && keys[k + 1] === y && keys[k + 2] === z) return s;
    this.slot = s;
    return -1;
  }

  /** Keeps the ASCII `text` for the numbers of the last get() that missed; returns its slot. */
  put(text: string): number {
    return this.slotFor(this.chunk.keep(text), text.length);
  }

  /**
   * Writes the text kept for (x, y, z) and returns true; or returns false, noting where the
   * chunk ends: the caller then writes the text straight into the chunk (no string made) and
   * calls keepWritten().
   */
  reuse(x: number, y: number, z: number): boolean {
    if (this.off) return false;
    const s = this.get(x, y, z);
    this.lookups++;
    if (s >= 0) {
      this.found++;
      this.write(s);
      return true;
    }
    if (this.lookups >= TRIAL && 4 * this.found < this.lookups) this.off = true;
    this.from = this.chunk.length;
    return false;
  }

  /** Keeps what the chunk got since reuse() returned false (ASCII) as the text for its numbers. */
  keepWritten(): void {
    if (this.off) return;
    this.slotFor(this.chunk.keepWritten(this.from), this.chunk.length - this.from);
  }

  /** Starts a writer's use: the texts kept stay, the count of lookups and finds starts again. */
  begin(): void {
    this.lookups = 0;
    this.found = 0;
    this.off = false;
  }

  private slotFor(at: number, length: number): number {
    if (this.generation !== this.chunk.generation) this.clear();
    const s = this.slot;
    const b = this.key;
    this.keys[3 * s] = b[0]!;
    this.keys[3 * s + 1] = b[1]!;
    this.keys[3 * s + 2] = b[2]!;
    this.starts[s] = at;
    this.lengths[s] = length;
    return s;
  }

  /** Appends slot s's text to the chunk. */
  write(s: number): void {
    this.chunk.copy(this.starts[s]!, this.lengths[s]!);
  }

  /** Forgets every slot's text (a caller whose texts stopped following the numbers alone). */
  clear(): void {
    this.keys.fill(NaN);
    this.generation = this.chunk.generation;
  }
}

/**
 * A plan writer's chunk and the text caches of its row fields: counts (n, max_tokens),
 * posteriors (p_mean to p_high, keyed by α and β; their interval is the set's `interval`) and
 * values; `constants` are the layout's own texts, pinned in the chunk's arena by the writer on
 * first use.
 */
export interface RowTexts {
  readonly chunk: ByteChunk;
  readonly counts: TextCache;
  readonly posteriors: TextCache;
  readonly values: TextCache;
  /** The credible interval (a plan's `interval`) the posteriors' texts were written at. */
  interval: number;
  constants?: Int32Array;
  /** True while a writer uses the set. */
  busy: boolean;
}

/** Lookups after which a TextCache that found under a quarter of them stops (see TextCache). */
const TRIAL = 4096;

/** Chunk capacity before a row past it is written out (plan/serialize.ts yields then). */
export const CHUNK = 1 << 16;

/** Kept for the thread, one set per layout (pretty, compact): their texts hold the field names. */
const kept = new Map<boolean, RowTexts>();

/**
 * Row text caches for a plan of `rows` rows written `pretty` or compact at credible interval
 * `interval`, kept for the thread (call release() when done): a cached text is a pure function
 * of its numbers, the layout and (posteriors) the interval, so a service's plans reuse the
 * texts of earlier plans (same bytes); a plan at another interval than the set's last one
 * clears its posteriors' texts. Bounded: two sets of 2^12 to 2^16 slots, a set replaced by a
 * larger one when a larger plan needs more slots, and an arena of at most 96 bytes a slot. A
 * set in use (a writer not finished) is not shared: a second writer gets a set of its own.
 */
export function rowTexts(pretty: boolean, rows: number, interval: number): RowTexts {
  const bits = cacheBits(rows);
  let texts = kept.get(pretty);
  if (texts !== undefined && texts.busy) return newSet(bits, true, interval);
  if (texts === undefined || texts.counts.bits < bits) {
    texts = newSet(bits, false, interval);
    kept.set(pretty, texts);
  }
  if (texts.interval !== interval) {
    texts.posteriors.clear();
    texts.interval = interval;
  }
  for (const cache of [texts.counts, texts.posteriors, texts.values]) cache.begin();
  texts.busy = true;
  return texts;
}

/** log2 of a text cache's slots for a plan of `rows` rows: 2^12 to 2^16, about one a row. */
export function cacheBits(rows: number): number {
  return Math.min(16, Math.max(12, Math.ceil(Math.log2(rows + 1))));
}

/** Ends a writer's use of a set from rowTexts. */
export function release(texts: RowTexts): void {
  texts.busy = false;
}

function newSet(bits: number, busy: boolean, interval: number): RowTexts {
  const chunk = new ByteChunk(CHUNK + 1024, 1 << 14, 96 << bits);
  return { chunk, counts: new TextCache(bits, chunk), posteriors: new TextCache(bits, chunk), values: new TextCache(bits, chunk), interval, busy };
}
