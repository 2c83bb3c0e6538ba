import { fnv1a } from '../math/hash.js';
import { HashSlots } from './hash-slots.js';

/** The parts of a PackedIdIndex, typed arrays only (with `size`): what crosses a thread. */
export interface PackedIdParts {
  readonly size: number;
  readonly units: Uint16Array;
  readonly ends: Int32Array;
  readonly hashes: Uint32Array;
  readonly slots: Int32Array;
}

/**
 * IdIndex (posterior/state-index.ts) with the ids packed as UTF-16 code units in one array, id
 * k at `units[ends[k-1] .. ends[k])`: no string per id, so a state of 10⁶ prompts keeps about
 * 24 MB of code units off the heap instead of 10⁶ strings on it (~40 MB that every full
 * collection marks), and its parts, typed arrays only, move between threads without a copy
 * (store/scan-thread.ts). Ids are compared unit by unit; `idAt` makes a string.
 * Positions, hashes and probing are IdIndex's (posterior/hash-slots.ts). O(1) expected a lookup.
 */
export class PackedIdIndex extends HashSlots {
  private units: Uint16Array;
  private readonly ends: Int32Array;
  private count: number;

  /** An index for up to `capacity` distinct ids (parts: one made elsewhere, `parts()`). */
  constructor(capacity: number, parts?: PackedIdParts) {
    super(parts?.hashes ?? new Uint32Array(capacity), parts?.slots ?? new Int32Array(HashSlots.slotsFor(capacity)));
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
    const h = fnv1a(id);
    const slot = this.slotOf(id, h);
    if (this.slots[slot]! > 0) return this.slots[slot]! - 1;
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
    this.hashes[k] = h;
    this.slots[slot] = k + 1;
    this.count = k + 1;
    return k;
  }

  /** The position of `id`, or −1; `hash`, when the caller has it, must be fnv1a(id). O(length of id) expected. */
  find(id: string, hash = fnv1a(id)): number {
    return this.slots[this.slotOf(id, hash)]! - 1;
  }

  /** The parts, the code units trimmed to those used (a copy of them; the index stays usable). */
  parts(): PackedIdParts {
    const used = this.count === 0 ? 0 : this.ends[this.count - 1]!;
    return { size: this.count, units: this.units.slice(0, used), ends: this.ends, hashes: this.hashes, slots: this.slots };
  }

  protected same(k: number, id: string): boolean {
    const start = k === 0 ? 0 : this.ends[k - 1]!;
    if (this.ends[k]! - start !== id.length) return false;
    const units = this.units;
    for (let j = 0; j < id.length; j++) if (units[start + j] !== id.charCodeAt(j)) return false;
    return true;
  }
}
