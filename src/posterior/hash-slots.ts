/**
 * Positions of distinct ids by open addressing with linear probing on the ids' FNV-1a hashes
 * (math/hash.ts), in one Int32Array at most half full: the probing that IdIndex (ids as
 * strings, posterior/state-index.ts) and PackedIdIndex (ids as packed code units,
 * posterior/packed-ids.ts) share; each says how its id at a position is compared (`same`).
 *
 * A slot is `width` words side by side: 1 + the id's position (0: empty), the id's hash, then
 * words of the index's own (where PackedIdIndex keeps the id's units). A lookup reads its slot's
 * words from one cache line, so a hit waits for one miss there and then the id's own: a
 * candidate looked up in an order other than the table's costs two misses one after another,
 * not four (slot, hash, id's end, id's units). O(1) probes expected.
 */
export abstract class HashSlots {
  /** The table's slots for `capacity` ids: a power of two, at least 2·capacity + 1 and 16. */
  static slotsFor(capacity: number): number {
    return 1 << Math.max(4, Math.ceil(Math.log2(2 * capacity + 1)));
  }

  /** Slots − 1 (their count is a power of two). */
  protected readonly mask: number;

  /** `slots`: `width` words a slot (a table made with `slotsFor` slots). */
  protected constructor(protected readonly slots: Int32Array, protected readonly width: number) {
    this.mask = slots.length / width - 1;
  }

  /** Whether the id at position `k`, whose slot's words start at `at`, is `id`. */
  protected abstract same(k: number, id: string, at: number): boolean;

  /** Where the words of the slot holding `id` (whose hash is `hash`) start, or of the empty slot where it would go. */
  protected slotOf(id: string, hash: number): number {
    const { slots, width } = this;
    const h = hash | 0;
    let slot = hash & this.mask;
    for (;;) {
      const at = slot * width;
      const k = slots[at]! - 1;
      if (k < 0 || (slots[at + 1] === h && this.same(k, id, at))) return at;
      slot = (slot + 1) & this.mask;
    }
  }

  /** Where the words of the first slot probed for `hash` start. */
  protected firstSlot(hash: number): number {
    return (hash & this.mask) * this.width;
  }

  /** Fills the empty slot at `at` with position `k` and its hash. */
  protected fill(at: number, k: number, hash: number): void {
    this.slots[at] = k + 1;
    this.slots[at + 1] = hash | 0;
  }
}
