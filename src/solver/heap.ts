/**
 * A binary max-heap of item indices keyed by (priority desc, tie asc), in typed arrays:
 * 12 bytes an entry. Ties break on a stable per-item number, so the pop order never depends
 * on the order items were pushed.
 */
export class MaxHeap {
  private readonly keys: Float64Array;
  private readonly items: Int32Array;
  private count = 0;
  /** Every item in pop order at equal keys (tie, then item); made on first use. */
  private order: Int32Array | undefined;
  /** plateauAtLeast's walk, kept between calls. */
  private stack = new Int32Array(0);

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

  /**
   * Whether at least `min` entries share the top key (they form a subtree at the root: a
   * parent's key is at least its children's). A walk of at most 2·min + 1 entries.
   */
  plateauAtLeast(min: number): boolean {
    if (this.count < min) return false;
    const top = this.keys[0]!;
    if (this.stack.length < 2 * min + 1) this.stack = new Int32Array(2 * min + 1);
    const stack = this.stack;
    let depth = 0;
    let found = 0;
    stack[depth++] = 0;
    while (depth > 0) {
      const pos = stack[--depth]!;
      if (++found >= min) return true;
      for (let child = 2 * pos + 1; child <= 2 * pos + 2 && child < this.count; child++) {
        if (this.keys[child] === top) stack[depth++] = child;
      }
    }
    return false;
  }

  /**
   * Removes every entry whose key equals the top key and returns their items, in the order
   * pop() would give them unless `ordered` is false (then in no particular order: see
   * orderByPop). The other entries stay, unordered: call heapify() after appending. O(count).
   */
  removeTopPlateau(ordered = true): Int32Array {
    const top = this.keys[0]!;
    let k = 0;
    let kept = 0;
    const out = new Int32Array(this.count);
    for (let pos = 0; pos < this.count; pos++) {
      const key = this.keys[pos]!;
      const item = this.items[pos]!;
      if (key === top) out[k++] = item;
      else {
        this.keys[kept] = key;
        this.items[kept++] = item;
      }
    }
    this.count = kept;
    const items = out.subarray(0, k);
    return ordered ? this.orderByPop(items) : items;
  }

  /**
   * Sorts `items` in place into the order pop() gives equal keys (tie asc, then item asc).
   * O(min(k log k, capacity)): a native typed-array sort, or for many, a pick from all items
   * sorted once.
   */
  orderByPop(items: Int32Array): Int32Array {
    const k = items.length;
    if (16 * k >= this.tie.length) {
      // Many: pick them from all items in pop order (sorted once a heap), O(capacity).
      const order = (this.order ??= popOrder(this.tie));
      const marked = new Uint8Array(this.tie.length);
      for (let j = 0; j < k; j++) marked[items[j]!] = 1;
      let j = 0;
      for (let r = 0; r < order.length; r++) if (marked[order[r]!] === 1) items[j++] = order[r]!;
      return items;
    }
    return sortByPopOrder(items, this.tie);
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

/**
 * All items 0..tie.length − 1 in the heap's order at equal keys (tie, then item): a stable
 * least-significant-digit radix sort from item order, 11 bits of tie a pass (three passes),
 * each tie carried beside its item so a pass reads memory in order. O(N + 2^11) a pass.
 */
function popOrder(tie: Uint32Array): Int32Array {
  const size = tie.length;
  let items = new Int32Array(size);
  for (let i = 0; i < size; i++) items[i] = i;
  let keys = tie.slice();
  let toItems = new Int32Array(size);
  let toKeys = new Uint32Array(size);
  const start = new Int32Array(1 << 11);
  for (let shift = 0; shift < 32; shift += 11) {
    start.fill(0);
    for (let j = 0; j < size; j++) start[(keys[j]! >>> shift) & 0x7ff]!++;
    let at = 0;
    for (let d = 0; d < start.length; d++) {
      const count = start[d]!;
      start[d] = at;
      at += count;
    }
    for (let j = 0; j < size; j++) {
      const key = keys[j]!;
      const to = start[(key >>> shift) & 0x7ff]!++;
      toItems[to] = items[j]!;
      toKeys[to] = key;
    }
    [items, toItems] = [toItems, items];
    [keys, toKeys] = [toKeys, keys];
  }
  return items;
}

/** Sorts `items` in place by (tie, item), the heap's order at equal keys. O(k log k). */
function sortByPopOrder(items: Int32Array, tie: Uint32Array): Int32Array {
  const k = items.length;
  if (tie.length <= 1 << 21) {
    // (tie, item) as one exact double, tie·2^21 + item < 2^53: a native numeric sort.
    const order = new Float64Array(k);
    for (let j = 0; j < k; j++) order[j] = tie[items[j]!]! * 2097152 + items[j]!;
    order.sort();
    for (let j = 0; j < k; j++) items[j] = order[j]! % 2097152;
    return items;
  }
  return items.sort((a, b) => tie[a]! - tie[b]! || a - b);
}
