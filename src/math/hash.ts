/** FNV-1a 32-bit hash of a string: a stable, order-independent tie-break and seed mixer. */
export function fnv1a(text: string): number {
  return fnv1aAfter(0x811c9dc5, text);
}

/**
 * fnv1a of the text whose UTF-16 code units are `units[from, to)`, as an int32 (fnv1a(text) | 0,
 * as hash tables keep it): for texts kept packed, without a string. O(to − from).
 */
export function fnv1aUnits(units: Uint16Array, from: number, to: number): number {
  let h = 0x811c9dc5;
  for (let u = from; u < to; u++) h = Math.imul(h ^ units[u]!, 0x01000193);
  return h | 0;
}

/**
 * fnv1a(prefix + text), given `after` = fnv1a(prefix): the hash of many texts after one prefix,
 * with the prefix hashed once and no string made. O(length of text).
 */
export function fnv1aAfter(after: number, text: string): number {
  let h = after;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/**
 * The first key that repeats an earlier one, in order: `{ at, before }` (positions), or
 * undefined when all are distinct. `hashes[i]` must be fnv1a(keyOf(i)) (any hash of the key
 * works), and `collide` the hashes that occur more than once among them (collidingHashes).
 * Compares strings only where hashes collide: no map of N strings. A bitmap of the colliding
 * hashes' low 16 bits turns nearly every hash away before the set is asked (10⁶ ids: 41 →
 * 5 ms; a hash past 2³⁰ read for the set is a heap number). O(N).
 */
export function firstRepeat(
  count: number, keyOf: (i: number) => string, hashes: Uint32Array, collide: Set<number> | undefined,
): { at: number; before: number } | undefined {
  if (collide === undefined) return undefined;
  const bits = new Int32Array(1 << 11);
  for (const h of collide) bits[(h & 0xffff) >>> 5]! |= 1 << (h & 31);
  const first = new Map<string, number>();
  for (let i = 0; i < count; i++) {
    const h = hashes[i]!;
    if ((bits[(h & 0xffff) >>> 5]! & (1 << (h & 31))) === 0 || !collide.has(h)) continue;
    const key = keyOf(i);
    const before = first.get(key);
    if (before !== undefined) return { at: i, before };
    first.set(key, i);
  }
  return undefined;
}

/**
 * The values that occur more than once among `hashes[0, count)`, or undefined when none does.
 * An open-addressing table of positions + 1 (0: empty), at most half full, linear probing:
 * O(N) expected, 4 bytes a slot (a sorted copy took 3–4 times as long at 10⁶ hashes). Hashes
 * made to crowd the table (more than 8 probes an entry in all) are sorted instead: O(N log N).
 */
export function collidingHashes(count: number, hashes: Uint32Array): Set<number> | undefined {
  return tableCollisions(count, hashes) ?? sortedCollisions(count, hashes);
}

/** collidingHashes by sorting a copy (a native typed-array sort). O(N log N). */
function sortedCollisions(count: number, hashes: Uint32Array): Set<number> | undefined {
  const sorted = hashes.slice(0, count).sort();
  let collide: Set<number> | undefined;
  for (let k = 1; k < sorted.length; k++) {
    if (sorted[k] === sorted[k - 1]) (collide ??= new Set()).add(sorted[k]!);
  }
  return collide;
}

/** collidingHashes by the table, as a set (`null` when none repeats), or undefined when it took too many probes. */
function tableCollisions(count: number, hashes: Uint32Array): Set<number> | null | undefined {
  const bits = Math.max(4, Math.ceil(Math.log2(2 * count + 1)));
  const shift = 32 - bits;
  const mask = (1 << bits) - 1;
  const table = new Int32Array(1 << bits);
  let probes = 8 * count;
  let collide: Set<number> | null = null;
  for (let i = 0; i < count; i++) {
    const h = hashes[i]!;
    // Fibonacci hashing spreads hashes that differ in their low bits only (FNV-1a's often do).
    let slot = Math.imul(h, 0x9e3779b1) >>> shift;
    for (;;) {
      const at = table[slot]!;
      if (at === 0) {
        table[slot] = i + 1;
        break;
      }
      if (hashes[at - 1] === h) {
        (collide ??= new Set()).add(h);
        break;
      }
      if (--probes < 0) return undefined;
      slot = (slot + 1) & mask;
    }
  }
  return collide;
}
