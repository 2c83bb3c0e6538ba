/** FNV-1a 32-bit hash of a string: a stable, order-independent tie-break and seed mixer. */
export function fnv1a(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/**
 * The first key that repeats an earlier one, in order: `{ at, before }` (positions), or
 * undefined when all are distinct. `hashes[i]` must be fnv1a(keyOf(i)) (any hash of the key
 * works). Sorts a copy of the 32-bit hashes (sortedHashes) and compares strings only where
 * hashes collide: O(N) numbers and no map of N strings.
 */
export function firstRepeat(count: number, keyOf: (i: number) => string, hashes: Uint32Array): { at: number; before: number } | undefined {
  const sorted = sortedHashes(hashes, count);
  let collide: Set<number> | undefined;
  for (let k = 1; k < sorted.length; k++) {
    if (sorted[k] === sorted[k - 1]) (collide ??= new Set()).add(sorted[k]!);
  }
  if (collide === undefined) return undefined;
  const first = new Map<string, number>();
  for (let i = 0; i < count; i++) {
    if (!collide.has(hashes[i]!)) continue;
    const key = keyOf(i);
    const before = first.get(key);
    if (before !== undefined) return { at: i, before };
    first.set(key, i);
  }
  return undefined;
}

/**
 * A sorted copy of `hashes[0 .. count)`: a native typed-array sort for fewer than 2^14, else a
 * least-significant-digit radix sort, two passes of 16 bits (O(N + 2^16) each, about 8× the
 * native sort's speed at 10^6).
 */
export function sortedHashes(hashes: Uint32Array, count: number): Uint32Array {
  const a = hashes.slice(0, count);
  if (count < 1 << 14) return a.sort();
  const b = new Uint32Array(count);
  const start = new Int32Array(1 << 16);
  for (const [from, to, shift] of [[a, b, 0], [b, a, 16]] as const) {
    start.fill(0);
    for (let j = 0; j < count; j++) start[(from[j]! >>> shift) & 0xffff]!++;
    let at = 0;
    for (let d = 0; d < start.length; d++) {
      const size = start[d]!;
      start[d] = at;
      at += size;
    }
    for (let j = 0; j < count; j++) {
      const x = from[j]!;
      to[start[(x >>> shift) & 0xffff]!++] = x;
    }
  }
  return a;
}
