/**
 * Positions of distinct ids by open addressing with linear probing on the ids' FNV-1a hashes
 * (math/hash.ts), in typed arrays at most half full: the probing that IdIndex (ids as strings,
 * posterior/state-index.ts) and PackedIdIndex (ids as packed code units, posterior/packed-ids.ts)
 * share; each says how its id at a position is compared (`same`). O(1) probes expected.
 */
export abstract class HashSlots {
  /** The table's size for `capacity` ids: a power of two, at least 2·capacity + 1 and 16. */
  static slotsFor(capacity: number): number {
    return 1 << Math.max(4, Math.ceil(Math.log2(2 * capacity + 1)));
  }

  private readonly mask: number;

  /** `hashes[k]`: the hash of the id at position k; `slots`: 1 + a position, 0 an empty slot (length a power of two). */
  protected constructor(protected readonly hashes: Uint32Array, protected readonly slots: Int32Array) {
    this.mask = slots.length - 1;
  }

  /** Whether the id at position `k` is `id`. */
  protected abstract same(k: number, id: string): boolean;

  /** The slot holding `id` (whose hash is `hash`), or the empty slot where it would go. */
  protected slotOf(id: string, hash: number): number {
    let slot = hash & this.mask;
    for (;;) {
      const k = this.slots[slot]! - 1;
      if (k < 0 || (this.hashes[k] === hash && this.same(k, id))) return slot;
      slot = (slot + 1) & this.mask;
    }
  }
}
