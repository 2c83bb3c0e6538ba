/**
 * Cursor states that prompts with identical curves share (value/curves.ts). A node is one
 * curve's state at one n: its slots' moments and what was read off it once (the next gain, a
 * walk's end). A node never changes after it is made: a prompt that moves goes to another node
 * (its `next`, or a walk's end), made once for all prompts of its class. Typed arrays grown by
 * doubling; at most `limit` nodes (curves.ts then keeps a prompt's state on its own).
 * Memory: 8·(slots + 7) + 24 bytes a node.
 */
export class CurveNodes {
  count = 0;
  /** Moments of each node's slots (k a node), its n and its class. */
  term: Float64Array;
  n: Int32Array;
  cls: Int32Array;
  /** The node one rollout up, or −1 while none is made. */
  next: Int32Array;
  /** Prompts whose cursor is at the node now. */
  refs: Int32Array;
  /** The gain of the next rollout, NaN until read. */
  gain: Float64Array;
  /** The last walk from the node (advanceWhile): its arguments, end node, rollouts and gains. */
  walkCost: Float64Array;
  walkLambda: Float64Array;
  walkMax: Int32Array;
  walkEnd: Int32Array;
  walkTaken: Int32Array;
  walkGain: Float64Array;
  walkNext: Float64Array;

  constructor(
    private readonly k: number,
    readonly limit: number,
  ) {
    const cap = 64;
    this.term = new Float64Array(cap * k);
    this.n = new Int32Array(cap);
    this.cls = new Int32Array(cap);
    this.next = new Int32Array(cap);
    this.refs = new Int32Array(cap);
    this.gain = new Float64Array(cap);
    this.walkCost = new Float64Array(cap);
    this.walkLambda = new Float64Array(cap);
    this.walkMax = new Int32Array(cap);
    this.walkEnd = new Int32Array(cap);
    this.walkTaken = new Int32Array(cap);
    this.walkGain = new Float64Array(cap);
    this.walkNext = new Float64Array(cap);
  }

  full(): boolean {
    return this.count >= this.limit;
  }

  /** A new node of class `cls` at n with the moments of `from` (a node, or −1: left to fill). */
  make(cls: number, n: number, from: number): number {
    if (this.count === this.n.length) this.grow();
    const node = this.count++;
    const k = this.k;
    if (from >= 0) this.term.copyWithin(node * k, from * k, from * k + k);
    this.n[node] = n;
    this.cls[node] = cls;
    this.next[node] = -1;
    this.refs[node] = 0;
    this.gain[node] = NaN;
    this.walkLambda[node] = NaN;
    return node;
  }

  /** Takes back the last node made (a walk that took nothing). */
  dropLast(): void {
    this.count--;
  }

  private grow(): void {
    const cap = this.n.length * 2;
    const more = <T extends Float64Array | Int32Array>(a: T, size: number): T => {
      const b = new (a.constructor as new (n: number) => T)(size);
      b.set(a);
      return b;
    };
    this.term = more(this.term, cap * this.k);
    this.n = more(this.n, cap);
    this.cls = more(this.cls, cap);
    this.next = more(this.next, cap);
    this.refs = more(this.refs, cap);
    this.gain = more(this.gain, cap);
    this.walkCost = more(this.walkCost, cap);
    this.walkLambda = more(this.walkLambda, cap);
    this.walkMax = more(this.walkMax, cap);
    this.walkEnd = more(this.walkEnd, cap);
    this.walkTaken = more(this.walkTaken, cap);
    this.walkGain = more(this.walkGain, cap);
    this.walkNext = more(this.walkNext, cap);
  }
}

/**
 * Classes of prompts whose curve parameters are bit-identical (`x[i]`, and `y[i]` when
 * given): the same parameters give the same arithmetic, so the same numbers. Class ids in
 * order of first appearance; `first[c]` is class c's first prompt, `members[c]` its size.
 * Open addressing over the parameters' 32-bit words: O(N) expected, 16 bytes a prompt while
 * it runs.
 */
export function curveClasses(x: Float64Array, y: Float64Array | undefined): { classOf: Int32Array; count: number; first: Int32Array; members: Int32Array } {
  const size = x.length;
  const xw = new Uint32Array(x.buffer, x.byteOffset, 2 * size);
  const yw = y === undefined ? xw : new Uint32Array(y.buffer, y.byteOffset, 2 * size);
  let cap = 16;
  while (cap < 2 * size) cap *= 2;
  const mask = cap - 1;
  const table = new Int32Array(cap).fill(-1);
  const classOf = new Int32Array(size);
  const first = new Int32Array(size);
  const members = new Int32Array(size);
  let count = 0;
  for (let i = 0; i < size; i++) {
    const x0 = xw[2 * i]!;
    const x1 = xw[2 * i + 1]!;
    const y0 = yw[2 * i]!;
    const y1 = yw[2 * i + 1]!;
    let h = Math.imul(x0 ^ Math.imul(x1, 0x9e3779b1), 0x85ebca6b) ^ Math.imul(y0 ^ Math.imul(y1, 0xc2b2ae35), 0x27d4eb2f);
    h ^= h >>> 15;
    let slot = h & mask;
    for (;;) {
      const c = table[slot]!;
      if (c < 0) {
        table[slot] = count;
        first[count] = i;
        members[count] = 1;
        classOf[i] = count++;
        break;
      }
      const f = first[c]!;
      if (xw[2 * f] === x0 && xw[2 * f + 1] === x1 && yw[2 * f] === y0 && yw[2 * f + 1] === y1) {
        members[c]!++;
        classOf[i] = c;
        break;
      }
      slot = (slot + 1) & mask;
    }
  }
  return { classOf, count, first: first.slice(0, count), members: members.slice(0, count) };
}
