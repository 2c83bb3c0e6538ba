/**
 * A binary max-heap of item indices keyed by (priority desc, tie asc), in typed arrays:
 * 12 bytes an entry. Ties break on a stable per-item number, so the pop order never depends
 * on the order items were pushed.
 */
export class MaxHeap {
  private readonly keys: Float64Array;
  private readonly items: Int32Array;
  private count = 0;

  constructor(
    capacity: number,
    private readonly tie: Uint32Array,
  ) {
    this.keys = new Float64Array(capacity);
    this.items = new Int32Array(capacity);
  }

  get size(): number {
    return this.count;
  }

  topKey(): number {
    return this.keys[0]!;
  }

  topItem(): number {
    return this.items[0]!;
  }

  private above(ka: number, ia: number, kb: number, ib: number): boolean {
    if (ka !== kb) return ka > kb;
    const ta = this.tie[ia]!;
    const tb = this.tie[ib]!;
    return ta !== tb ? ta < tb : ia < ib;
  }

  /** Adds (key, item) at the end without ordering: the heap is valid again after heapify(). */
  append(key: number, item: number): void {
    this.keys[this.count] = key;
    this.items[this.count++] = item;
  }

  /** Largest key appended so far (0 if none is above 0). O(count). */
  maxKey(): number {
    let best = 0;
    for (let k = 0; k < this.count; k++) if (this.keys[k]! > best) best = this.keys[k]!;
    return best;
  }

  /** Orders the appended entries into a heap, in O(count). */
  heapify(): void {
    for (let pos = (this.count >> 1) - 1; pos >= 0; pos--) this.siftFrom(pos, this.keys[pos]!, this.items[pos]!);
  }

  clear(): void {
    this.count = 0;
  }

  /** Removes the top and returns its item. */
  pop(): number {
    const top = this.items[0]!;
    const last = --this.count;
    if (last > 0) this.siftDown(this.keys[last]!, this.items[last]!);
    return top;
  }

  /** Replaces the top with (key, item): one sift instead of a pop and a push. */
  replaceTop(key: number, item: number): void {
    this.siftDown(key, item);
  }

  private siftDown(key: number, item: number): void {
    this.siftFrom(0, key, item);
  }

  private siftFrom(start: number, key: number, item: number): void {
    const n = this.count;
    let pos = start;
    for (;;) {
      let child = 2 * pos + 1;
      if (child >= n) break;
      const right = child + 1;
      if (right < n && this.above(this.keys[right]!, this.items[right]!, this.keys[child]!, this.items[child]!)) child = right;
      const ck = this.keys[child]!;
      const ci = this.items[child]!;
      if (!this.above(ck, ci, key, item)) break;
      this.keys[pos] = ck;
      this.items[pos] = ci;
      pos = child;
    }
    this.keys[pos] = key;
    this.items[pos] = item;
  }
}
