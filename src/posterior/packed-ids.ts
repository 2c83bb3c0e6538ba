import { fnv1a, fnv1aUnits } from '../math/hash.js';
import { HashSlots } from './hash-slots.js';

/** The parts of a PackedIdIndex, typed arrays only (with `size`): what crosses a thread. */
export interface PackedIdParts {
  readonly size: number;
  readonly units: Uint16Array;
  readonly ends: Int32Array;
  readonly slots: Int32Array;
}

/** A slot's words: 1 + the id's position, its hash (HashSlots), and where its units start. */
const WIDTH = 3;

/** Pushed ids placed at a time by index(): their first slots read together. */
const PLACE_BLOCK = 512;

/**
 * IdIndex (posterior/state-index.ts) with the ids packed as UTF-16 code units in one array, id
 * k at `units[ends[k-1] .. ends[k])`: no string per id, so a state of 10⁶ prompts keeps about
 * 24 MB of code units off the heap instead of 10⁶ strings on it (~40 MB that every full
 * collection marks), and its parts, typed arrays only, move between threads without a copy
 * (store/scan-thread.ts). Ids are compared unit by unit; `idAt` makes a string.
 * Positions, hashes and probing are IdIndex's (posterior/hash-slots.ts); a slot also says where
 * its id's units start, so a lookup reads the id's units and its end side by side, not one
 * after the other. Memory: 12–24 bytes of table, 4 of end and 2 a code unit an id. O(1)
 * expected a lookup.
 */
export class PackedIdIndex extends HashSlots {
  private units: Uint16Array;
  private readonly ends: Int32Array;
  private count: number;
  /** What findMany's first passes read, kept so that a compiler cannot drop their loads. */
  private touched = 0;

  /** An index for up to `capacity` distinct ids (parts: one made elsewhere, `parts()`). */
  constructor(capacity: number, parts?: PackedIdParts) {
    super(parts?.slots ?? new Int32Array(WIDTH * HashSlots.slotsFor(capacity)), WIDTH);
    this.units = parts?.units ?? new Uint16Array(Math.max(16, 16 * capacity));
    this.ends = parts?.ends ?? new Int32Array(capacity);
    this.count = parts?.size ?? 0;
  }

  /** Distinct ids added. */
  get size(): number {
    return this.count;
  }

  /** The id at position `k` (0 ≤ k < size), as a new string. */
  idAt(k: number): string {
    const start = k === 0 ? 0 : this.ends[k - 1]!;
    const units = this.units.subarray(start, this.ends[k]!);
    return Buffer.from(units.buffer, units.byteOffset, units.byteLength).toString('utf16le');
  }

  /** The position of `id`, added at the end when new (at most `capacity` ids in all). O(length of id) expected. */
  add(id: string): number {
    if (this.pushed > 0) throw new Error('PackedIdIndex.add after push(): index() first');
    const h = fnv1a(id);
    const at = this.slotOf(id, h);
    if (this.slots[at]! > 0) return this.slots[at]! - 1;
    const k = this.keep(id);
    this.fill(at, k, h);
    this.slots[at + 2] = k === 0 ? 0 : this.ends[k - 1]!;
    return k;
  }

  /**
   * Appends `id` at position `size` without finding it: a reader of ids known distinct (a
   * table's keys) packs them all, then calls index() once, which places them a block at a time.
   * Until then find() does not see them.
   */
  push(id: string): number {
    this.pushed++;
    return this.keep(id);
  }

  /** Ids pushed and not yet placed in the table. */
  private pushed = 0;

  /** Packs `id`'s units after the last id's; returns its position. */
  private keep(id: string): number {
    const k = this.count;
    const start = k === 0 ? 0 : this.ends[k - 1]!;
    if (start + id.length > this.units.length) {
      const grown = new Uint16Array(Math.max(2 * this.units.length, start + id.length));
      grown.set(this.units.subarray(0, start));
      this.units = grown;
    }
    const units = this.units;
    for (let j = 0; j < id.length; j++) units[start + j] = id.charCodeAt(j);
    this.ends[k] = start + id.length;
    this.count = k + 1;
    return k;
  }

  /**
   * Places the pushed ids in the table, a block of PLACE_BLOCK at a time: their hashes (from
   * their units, fnv1a's), then every first slot read once (loads that do not wait for each
   * other, as in findMany), then the inserts, which then mostly meet slots already in the
   * caches. Returns false at the first id equal to an earlier one (the index is then unusable).
   * A table's keys read in its order meet their slots at random: one insert at a time, each
   * waited for a cache miss (10⁶ ids: 0.18 s of a thread's 1.4 s read, here).
   */
  index(): boolean {
    const { slots, ends, width, mask } = this;
    const units = this.units;
    const hashes = new Int32Array(PLACE_BLOCK);
    const first = new Int32Array(PLACE_BLOCK);
    for (let from = this.count - this.pushed; from < this.count; from += PLACE_BLOCK) {
      const to = Math.min(this.count, from + PLACE_BLOCK);
      let touched = 0;
      for (let k = from; k < to; k++) {
        const h = fnv1aUnits(units, k === 0 ? 0 : ends[k - 1]!, ends[k]!);
        hashes[k - from] = h;
        first[k - from] = (h & mask) * width;
        touched = (touched + slots[first[k - from]!]!) | 0;
      }
      this.touched = touched;
      for (let k = from; k < to; k++) {
        const h = hashes[k - from]!;
        let at = first[k - from]!;
        for (;;) {
          const other = slots[at]! - 1;
          if (other < 0) break;
          if (slots[at + 1] === h && this.sameUnits(other, k)) return false;
          at = (((at / width) + 1) & mask) * width;
        }
        slots[at] = k + 1;
        slots[at + 1] = h;
        slots[at + 2] = k === 0 ? 0 : ends[k - 1]!;
      }
    }
    this.pushed = 0;
    return true;
  }

  /** Whether the ids at positions `a` and `b` are equal, unit by unit. */
  private sameUnits(a: number, b: number): boolean {
    const { ends, units } = this;
    const startA = a === 0 ? 0 : ends[a - 1]!;
    const startB = b === 0 ? 0 : ends[b - 1]!;
    const n = ends[a]! - startA;
    if (ends[b]! - startB !== n) return false;
    for (let j = 0; j < n; j++) if (units[startA + j] !== units[startB + j]) return false;
    return true;
  }

  /** The position of `id`, or −1; `hash`, when the caller has it, must be fnv1a(id). O(length of id) expected. */
  find(id: string, hash = fnv1a(id)): number {
    return this.slots[this.slotOf(id, hash)]! - 1;
  }

  /**
   * `find` for the ids of `items[from, to)` (`hashes[i]` = fnv1a(items[i].id)): their
   * positions, or −1, into `out[0, to − from)`. The same answers as `find`, in three passes
   * over the block: the first reads every id's first slot, the second the ends and first units
   * of the ids those slots hold, the third compares (and probes on where the first slot was not
   * the id's). The loads of one pass do not wait for each other, so the memory serves many at
   * once: in an order other than the table's, the cache misses of a lookup overlap those of the
   * next ones instead of following one another (10⁶ ids in a shuffled order: 0.39–0.43 s one
   * by one, 0.19–0.22 s in blocks of 128–2,048, here). O(block · length of an id) expected.
   */
  findMany(items: readonly { readonly id: string }[], hashes: Uint32Array, from: number, to: number, out: Int32Array): void {
    const { slots, ends, units } = this;
    let touched = 0;
    for (let i = from; i < to; i++) out[i - from] = this.firstSlot(hashes[i]!);
    for (let j = 0; j < to - from; j++) touched = (touched + slots[out[j]!]!) | 0;
    for (let j = 0; j < to - from; j++) {
      const at = out[j]!;
      const k = slots[at]! - 1;
      if (k >= 0) touched = (touched + ends[k]! + units[slots[at + 2]!]!) | 0;
    }
    this.touched = touched;
    for (let i = from; i < to; i++) {
      const at = out[i - from]!;
      const k = slots[at]! - 1;
      const id = items[i]!.id;
      // An empty first slot: not there; the id in it: found; else probe on.
      out[i - from] = k < 0 ? -1 : slots[at + 1] === (hashes[i]! | 0) && this.same(k, id, at) ? k : this.find(id, hashes[i]);
    }
  }

  /**
   * The parts, the code units trimmed to those used: a copy of them (the index stays usable),
   * or with `trim` false a view of them, whose whole array a thread then hands over without a
   * copy (store/scan-thread.ts: 23 MB less at once at 10⁶ ids).
   */
  parts(trim = true): PackedIdParts {
    const used = this.count === 0 ? 0 : this.ends[this.count - 1]!;
    return { size: this.count, units: trim ? this.units.slice(0, used) : this.units.subarray(0, used), ends: this.ends, slots: this.slots };
  }

  protected same(k: number, id: string, at: number): boolean {
    const start = this.slots[at + 2]!;
    if (this.ends[k]! - start !== id.length) return false;
    const units = this.units;
    for (let j = 0; j < id.length; j++) if (units[start + j] !== id.charCodeAt(j)) return false;
    return true;
  }
}
