import { CurveNodes, curveClasses } from './curve-nodes.js';
import { monomialMoment, stepFactors, stepGain } from './curve-step.js';
import { walkSlots, type WalkPrompt, type WalkResult } from './curve-walk.js';
import type { ValueFunction } from './functions.js';
import { slotsOf, WIDE, type Slots } from './slots.js';
import type { CurveMode, ValueCurves } from './types.js';

/**
 * Where a prompt's cursor state lives: a shared node (≥ 0), nowhere yet (NONE), or its own
 * row r, written OWN − r (≤ OWN).
 */
const OWN = -2;
const NONE = -1;
/** Own rows made at first, then doubled as more prompts need one. */
const FIRST_ROWS = 1024;

/**
 * Value curves of one value function for N prompts.
 *
 * Beta mode uses E[p^A (1−p)^B] = Π_{i<A}(α+i)·Π_{j<B}(β+j) / Π_{k<A+B}(α+β+k) for integer
 * A, B (the ratio B(α+A, β+B)/B(α, β) expanded): every factor lies in (0, 1], so the product
 * never overflows, and raising A or B by one is one multiplication. `betaMoment` in
 * math/beta.ts is the log-space reference it is tested against.
 *
 * Prompts with bit-identical parameters (a class: in a fresh state every prompt; in a warm
 * one, those with the same evidence) run the same arithmetic, so their cursors share states
 * (curve-nodes.ts): a seek, a move, a gain or a walk is computed once per class and state and
 * read by every prompt that reaches it, the same numbers as each prompt computing its own.
 * A prompt alone in its class, one that moves on alone from a state (a sampled walk), and any
 * prompt once the nodes reach their limit (N/2 + 4,096) keep their state in a row of their
 * own, as the arithmetic always did.
 * Memory: 12 bytes a prompt, 8·(slots + 1 (+ 1)) a prompt with a row of its own, 8·(slots + 7)
 * + 20 a node, allocated on the first seek or value, so curves a solver never reads (surplus
 * curves when nothing saturates) cost none.
 */
export class MonomialCurves implements ValueCurves {
  readonly size: number;
  private readonly slots: Slots;
  private readonly k: number;
  private readonly isBeta: boolean;
  private readonly alpha: Float64Array;
  private readonly beta: Float64Array;
  private readonly p: Float64Array;
  /** Per prompt: its class and where its state is. */
  private classOf: Int32Array = new Int32Array(0);
  private at = new Int32Array(0);
  /** Own rows (k terms each) and their n, given out in order; rows a prompt left for a node, to give again. */
  private term = new Float64Array(0);
  private cursor = new Int32Array(0);
  private owned = 0;
  private readonly freeRows: number[] = [];
  private classCount = 0;
  /** Per class: shared or not, folded constants (NaN until folded), the last seek's n and node. */
  private shared = new Uint8Array(0);
  private base = new Float64Array(0);
  private perN = new Float64Array(0);
  private seekN = new Int32Array(0);
  private seekNode = new Int32Array(0);
  private nodes: CurveNodes;
  /** Factors 1 + s of every slot for (facCls, facN), shared by nextGain and advance. */
  private readonly scratch: { inv: Float64Array; fac: Float64Array; nums: Float64Array; scratch: Float64Array };
  private facCls = -1;
  private facN = -1;
  private readonly prompt: { isBeta: boolean; alpha: number; beta: number; p: number; perN: number };
  // The number fields below start as NaN, not 0, and are always written before they are
  // read: a field that starts as a small integer is stored as one, and its first fraction
  // changes the object's hidden class, which throws away every method V8 had optimized for
  // the old one (about 20 in a 10⁵-prompt plan, each run unoptimized again until recompiled:
  // a warm 10⁵ plan took 0.93× and 0.955× the time, medians of two rounds of 12 runs taking
  // turns, the same bytes; a fresh 10⁵ and a warm 10⁶ plan within the noise).
  private readonly result: WalkResult = { gain: NaN, next: NaN };
  walkGain = NaN;
  walkNext = NaN;

  constructor(fn: ValueFunction, mode: CurveMode) {
    this.isBeta = mode.kind === 'beta';
    this.alpha = mode.kind === 'beta' ? mode.alpha : new Float64Array(0);
    this.beta = mode.kind === 'beta' ? mode.beta : new Float64Array(0);
    this.p = mode.kind === 'point' ? mode.p : new Float64Array(0);
    this.size = mode.kind === 'beta' ? mode.alpha.length : mode.p.length;
    this.slots = slotsOf(fn);
    this.k = this.slots.k;
    this.nodes = new CurveNodes(this.k, 0);
    this.scratch = {
      inv: new Float64Array(this.slots.groupAb.length),
      fac: new Float64Array(Math.max(this.k, WIDE)),
      nums: new Float64Array(this.k),
      scratch: new Float64Array(this.k),
    };
    this.prompt = { isBeta: this.isBeta, alpha: NaN, beta: NaN, p: NaN, perN: NaN }; // NaN: see `result`
  }

  /** Finds the classes and allocates the per-prompt storage on first use. */
  private storage(): void {
    if (this.at.length === this.size) return;
    const classes = curveClasses(this.isBeta ? this.alpha : this.p, this.isBeta ? this.beta : undefined);
    this.classOf = classes.classOf;
    this.classCount = classes.count;
    this.shared = Uint8Array.from(classes.members, (m) => (m > 1 ? 1 : 0));
    this.base = new Float64Array(classes.count).fill(NaN);
    this.perN = new Float64Array(this.slots.hasPerN ? classes.count : 0);
    this.seekN = new Int32Array(classes.count).fill(-1);
    this.seekNode = new Int32Array(classes.count);
    this.at = new Int32Array(this.size).fill(NONE);
    this.nodes = new CurveNodes(this.k, (this.size >> 1) + 4096);
  }

  /**
   * Gives prompt i a row of its own, holding `from`'s state, or none (zeros: a row not written
   * yet) when it had no state; a prompt that has its row keeps it. Rows are made as prompts
   * need them, not N at once: a warm state's 10⁶ prompts needed 673 here (N rows are made at
   * once when every prompt is alone in its class, as a point-mode policy's draws are).
   */
  private own(i: number, from: number): void {
    const k = this.k;
    const node = this.at[i]!;
    let r: number;
    if (node <= OWN) r = OWN - node;
    else {
      r = this.freeRows.pop() ?? this.owned++;
      if (r === this.cursor.length) this.growRows();
      if (from < 0) {
        this.term.fill(0, r * k, r * k + k);
        this.cursor[r] = 0;
      }
    }
    if (from >= 0) {
      const term = this.nodes.term;
      for (let t = 0; t < k; t++) this.term[r * k + t] = term[from * k + t]!;
      this.cursor[r] = this.nodes.n[from]!;
    }
    this.moveTo(i, OWN - r);
  }

  /** More own rows: twice as many (at least FIRST_ROWS, at most one a prompt). */
  private growRows(): void {
    const rows = this.classCount === this.size ? this.size : Math.min(this.size, Math.max(FIRST_ROWS, 2 * this.cursor.length));
    const term = new Float64Array(rows * this.k);
    term.set(this.term);
    this.term = term;
    const cursor = new Int32Array(rows);
    cursor.set(this.cursor);
    this.cursor = cursor;
  }

  /** Prompt i's own row (its `at` is OWN or below). */
  private rowOf(i: number): number {
    return OWN - this.at[i]!;
  }

  /** Puts prompt i's cursor at `node` (or an own row), counting the prompts at each node; a row left for a node is given again. */
  private moveTo(i: number, node: number): void {
    const refs = this.nodes.refs;
    const from = this.at[i]!;
    if (from >= 0) refs[from]!--;
    else if (from <= OWN && node > OWN) this.freeRows.push(OWN - from);
    if (node >= 0) refs[node]!++;
    this.at[i] = node;
  }

  /** E[p^A (1−p)^B] (beta mode) or p^A (1−p)^B (point mode) for prompt i (curve-step.ts monomialMoment). O(A + B). */
  moment(i: number, A: number, B: number): number {
    return this.isBeta ? monomialMoment(true, this.alpha[i]!, this.beta[i]!, NaN, A, B) : monomialMoment(false, NaN, NaN, this.p[i]!, A, B);
  }

  /** Folds the constant terms of prompt i's class once. Returns the class. */
  private constants(i: number): number {
    this.storage();
    const c = this.classOf[i]!;
    if (this.base[c] === this.base[c]) return c;
    let base = 0;
    let perN = 0;
    for (const t of this.slots.constTerms) {
      const v = t.coef * this.moment(i, t.a, t.b);
      if (t.e === 1) perN += v;
      else base += v;
    }
    this.base[c] = base;
    if (this.slots.hasPerN) this.perN[c] = perN;
    return c;
  }

  value(i: number, n: number): number {
    if (n <= 0) return 0;
    const c = this.constants(i);
    const { k, u, a, b, c0, c1 } = this.slots;
    let total = this.base[c]! + (this.slots.hasPerN ? n * this.perN[c]! : 0);
    for (let t = 0; t < k; t++) total += (c0[t]! + c1[t]! * n) * this.moment(i, a[t]! + u[t]! * n, b[t]! + (1 - u[t]!) * n);
    return total;
  }

  /** The moments of prompt i at n into `term[at ..]`. O(k·n). */
  private fill(term: Float64Array, at: number, i: number, n: number): void {
    const { k, u, a, b } = this.slots;
    for (let t = 0; t < k; t++) term[at + t] = this.moment(i, a[t]! + u[t]! * n, b[t]! + (1 - u[t]!) * n);
  }

  seek(i: number, n: number): number {
    const c = this.constants(i);
    const nodes = this.nodes;
    if (this.shared[c] === 1 && (this.seekN[c] === n || !nodes.full())) {
      if (this.seekN[c] !== n) {
        const node = nodes.make(c, n, -1);
        this.fill(nodes.term, node * this.k, i, n);
        this.seekN[c] = n;
        this.seekNode[c] = node;
      }
      this.moveTo(i, this.seekNode[c]!);
    } else {
      this.own(i, -1);
      const r = this.rowOf(i);
      this.fill(this.term, r * this.k, i, n);
      this.cursor[r] = n;
    }
    return this.current(i);
  }

  cursorOf(i: number): number {
    const node = this.at[i] ?? NONE;
    return node >= 0 ? this.nodes.n[node]! : node <= OWN ? this.cursor[OWN - node]! : 0;
  }

  /** Prompt i's shared state (a node), or −1 when its state is its own or it has none. */
  stateOf(i: number): number {
    const node = this.at[i] ?? NONE;
    return node >= 0 ? node : -1;
  }

  current(i: number): number {
    const node = this.at[i]!;
    const n = this.cursorOf(i);
    if (n <= 0) return 0;
    const term = node >= 0 ? this.nodes.term : this.term;
    const at = (node >= 0 ? node : OWN - node) * this.k;
    const c = this.classOf[i]!;
    const { k, c0, c1 } = this.slots;
    let total = this.base[c]! + (this.slots.hasPerN ? n * this.perN[c]! : 0);
    for (let t = 0; t < k; t++) total += (c0[t]! + c1[t]! * n) * term[at + t]!;
    return total;
  }

  /** The factors T_t(n+1)/T_t(n) of prompt i at n (curve-step.ts stepFactors), kept for (class, n): nextGain and advance share them. */
  private factors(i: number, n: number): Float64Array {
    const c = this.classOf[i]!;
    if (this.facCls === c && this.facN === n) return this.scratch.fac;
    this.facCls = c;
    this.facN = n;
    return this.isBeta
      ? stepFactors(this.slots, this.scratch, true, this.alpha[i]!, this.beta[i]!, NaN, n)
      : stepFactors(this.slots, this.scratch, false, NaN, NaN, this.p[i]!, n);
  }

  /**
   * v(n+1) − v(n). Slot t contributes (c0 + c1·n)·T(n) with T(n+1) = T(n)·f: its gain is
   * T·(c0·(f − 1) + c1·((n+1)·f − n)); constants add perN. O(slots), once per shared state.
   */
  nextGain(i: number): number {
    const node = this.at[i]!;
    if (node >= 0) {
      let g = this.nodes.gain[node]!;
      if (g !== g) this.nodes.gain[node] = g = this.gainAt(this.nodes.term, node * this.k, i, this.nodes.n[node]!);
      return g;
    }
    if (node === NONE) this.own(i, -1);
    const r = this.rowOf(i);
    return this.gainAt(this.term, r * this.k, i, this.cursor[r]!);
  }

  private gainAt(term: Float64Array, at: number, i: number, n: number): number {
    const c = this.classOf[i]!;
    return stepGain(this.slots, term, at, this.factors(i, n), this.base[c]!, this.slots.hasPerN ? this.perN[c]! : 0, n);
  }

  /**
   * nextGain → advance in one tight loop for n ≥ 1 (see ValueCurves.advanceWhile;
   * curve-walk.ts). A shared state remembers its last walk, so the prompts of a class at one
   * state walk once.
   */
  advanceWhile(i: number, unitCost: number, lambda: number, maxN: number): number {
    const node = this.at[i]!;
    const nodes = this.nodes;
    this.walkGain = 0;
    this.walkNext = NaN;
    if (node >= 0) {
      if (nodes.walkLambda[node] === lambda && nodes.walkCost[node] === unitCost && nodes.walkMax[node] === maxN) {
        this.moveTo(i, nodes.walkEnd[node]!);
        this.walkGain = nodes.walkGain[node]!;
        this.walkNext = nodes.walkNext[node]!;
        return nodes.walkTaken[node]!;
      }
      const start = nodes.n[node]!;
      if (start <= 0) return 0;
      // A prompt alone at its state walks in a row of its own: no other prompt would read the walk.
      if (!nodes.full() && nodes.refs[node]! > 1) {
        const end = nodes.make(nodes.cls[node]!, start, node);
        const taken = this.walk(nodes.term, end * this.k, i, start, unitCost, lambda, maxN);
        let to = end;
        if (taken === 0) {
          nodes.dropLast();
          to = node;
        } else nodes.n[end] = start + taken;
        nodes.walkCost[node] = unitCost;
        nodes.walkLambda[node] = lambda;
        nodes.walkMax[node] = maxN;
        nodes.walkEnd[node] = to;
        nodes.walkTaken[node] = taken;
        nodes.walkGain[node] = this.walkGain;
        nodes.walkNext[node] = this.walkNext;
        this.moveTo(i, to);
        return taken;
      }
      this.own(i, node);
    } else if (node === NONE) return 0;
    const r = this.rowOf(i);
    const start = this.cursor[r]!;
    if (start <= 0) return 0;
    const taken = this.walk(this.term, r * this.k, i, start, unitCost, lambda, maxN);
    this.cursor[r] = start + taken;
    return taken;
  }

  private walk(term: Float64Array, at: number, i: number, start: number, unitCost: number, lambda: number, maxN: number): number {
    const prompt: WalkPrompt = this.prompt;
    const c = this.classOf[i]!;
    this.prompt.alpha = this.isBeta ? this.alpha[i]! : 0;
    this.prompt.beta = this.isBeta ? this.beta[i]! : 0;
    this.prompt.p = this.isBeta ? 0 : this.p[i]!;
    this.prompt.perN = this.slots.hasPerN ? this.perN[c]! : 0;
    const taken = walkSlots(this.slots, this.scratch, term, at, prompt, start, unitCost, lambda, maxN, this.result);
    this.facCls = -1;
    this.walkGain = this.result.gain;
    this.walkNext = this.result.next;
    return taken;
  }

  advance(i: number): void {
    const node = this.at[i]!;
    if (node >= 0) {
      // A prompt alone at a state with no next one moves on in a row of its own.
      const child = this.nodes.next[node]! >= 0 || this.nodes.refs[node]! > 1 ? this.childOf(node, i) : -1;
      if (child >= 0) this.moveTo(i, child);
      else {
        this.own(i, node);
        this.advance(i);
      }
      return;
    }
    if (node === NONE) this.own(i, -1);
    const r = this.rowOf(i);
    const n = this.cursor[r]!;
    this.multiply(this.term, r * this.k, i, n);
    this.cursor[r] = n + 1;
  }

  /** The node one rollout above `node` (of prompt i's class), made on first use; −1 when the nodes are full. */
  private childOf(node: number, i: number): number {
    const nodes = this.nodes;
    let child = nodes.next[node]!;
    if (child >= 0 || nodes.full()) return child;
    const n = nodes.n[node]!;
    child = nodes.make(nodes.cls[node]!, n + 1, node);
    this.multiply(nodes.term, child * this.k, i, n);
    nodes.next[node] = child;
    return child;
  }

  /**
   * v(n+2) − v(n+1) at prompt i's cursor n, without moving it: the gain nextGain would give
   * after advance (the same numbers). O(slots).
   */
  gainAfterNext(i: number): number {
    const node = this.at[i]!;
    const child = node >= 0 ? this.childOf(node, i) : -1;
    if (child >= 0) {
      let g = this.nodes.gain[child]!;
      if (g !== g) this.nodes.gain[child] = g = this.gainAt(this.nodes.term, child * this.k, i, this.nodes.n[child]!);
      return g;
    }
    const n = this.cursorOf(i);
    const row = this.scratch.scratch;
    // No state yet (NONE): the zeros of a row not written.
    if (node === NONE) row.fill(0);
    else {
      const from = node >= 0 ? this.nodes.term : this.term;
      const at = (node >= 0 ? node : OWN - node) * this.k;
      for (let t = 0; t < this.k; t++) row[t] = from[at + t]!;
    }
    this.multiply(row, 0, i, n);
    return this.gainAt(row, 0, i, n + 1);
  }

  /** T(n+1) = T(n)·f for every slot of the moments at `term[at ..]`. */
  private multiply(term: Float64Array, at: number, i: number, n: number): void {
    const fac = this.factors(i, n);
    for (let t = 0; t < this.k; t++) term[at + t] = term[at + t]! * fac[t]!;
  }
}
