import type { Filler } from './fill.js';
import { moveRatio } from './types.js';

/**
 * The moves at the top key `top` (> 0, above the saturation floor), taken exactly as the heap
 * loop's pops would take them (fill.ts drain): items in the heap's order (tie, then index),
 * each while its next move keeps the key `top` (its tie is then still the smallest, so the
 * heap would pop it again at once); a next move below `top` goes back to the heap, which is
 * rebuilt once. A jump from 0 or a next move above `top` (a curve not concave there) hands
 * the rest back to the heap loop. Returns true when the budget is spent (drain stops).
 *
 * When the order cannot matter (oneEach: a fresh state, or a class of prompts with the same
 * evidence, whose curves share their states, ValueCurves.stateOf), the moves are taken in
 * index order without sorting the plateau, and its memory-order walk. O(N + k log k); O(N + k)
 * on that path.
 */
export function drainPlateau(f: Filler, top: number): boolean {
  const { heap, state } = f;
  const c = f.input.tokensPerRollout;
  const items = heap.removeTopPlateau(false);
  if (oneEach(f, items, top)) {
    const marked = new Uint8Array(f.size);
    // Index loops over the plateau (here and in oneEach): run once a plateau and unoptimized,
    // for-of made an iterator result an item (a fresh 10⁶ plan: ~80 MB of them).
    for (let k = 0; k < items.length; k++) marked[items[k]!] = 1;
    for (let i = 0; i < f.size; i++) {
      if (marked[i] === 0) continue;
      f.take(i);
      const key = f.keyOf(i);
      if (key === key) heap.append(key, i);
    }
    return finish(f);
  }
  heap.orderByPop(items);
  let j = 0;
  let stopped = false;
  plateau: for (; j < items.length; j++) {
    const i = items[j]!;
    for (;;) {
      if (f.spent()) {
        f.noteBound(top);
        stopped = true;
        break plateau;
      }
      if (state.n[i]! === 0) break plateau; // a jump: the heap loop shrinks it if it must
      if (!f.fits(1, c[i]!)) {
        f.noteBound(top);
        break; // dropped, as drain pops it
      }
      f.take(i);
      const next = f.keyOf(i);
      if (next !== next) break;
      if (next === top) continue;
      heap.append(next, i);
      if (next > top) {
        j++;
        break plateau;
      }
      break;
    }
  }
  for (; j < items.length; j++) heap.append(top, items[j]!);
  return stopped || finish(f);
}

/**
 * After a plateau: when the budget is spent the heap loop would stop at its top, noting the
 * bound at the largest key, so it is not rebuilt; otherwise it is. True when spent.
 */
function finish(f: Filler): boolean {
  const heap = f.heap;
  if (heap.size > 0 && f.spent()) {
    f.noteBound(Math.max(heap.maxKey(), 0));
    return true;
  }
  heap.heapify();
  return false;
}

/** Most curve states a plateau taken in index order may hold. */
const STATES = 16;

/**
 * Whether the heap's order cannot matter: every item of the plateau has n > 0, the same gain,
 * cost and upper bound, and a shared curve state (at most STATES of them) whose move after
 * this one falls below `top` (or is past the bound), so each item takes exactly one move and
 * the sums add equal numbers; and the budget has room for all of them, checked move by move
 * as fits and spent would. O(k).
 */
function oneEach(f: Filler, items: Int32Array, top: number): boolean {
  const cv = f.cv;
  if (cv.stateOf === undefined || cv.gainAfterNext === undefined || items.length === 0) return false;
  const { n } = f.state;
  const c = f.input.tokensPerRollout;
  const i0 = items[0]!;
  const g0 = f.gain[i0]!;
  const c0 = c[i0]!;
  const max0 = f.maxOf(i0);
  const uc = f.unitCost(i0);
  const states: number[] = [];
  for (let k = 0; k < items.length; k++) {
    const i = items[k]!;
    if (f.gain[i] !== g0 || c[i] !== c0 || n[i] === 0 || f.maxOf(i) !== max0) return false;
    const s = cv.stateOf(i);
    if (s < 0) return false;
    if (states.includes(s)) continue;
    if (states.length === STATES) return false;
    states.push(s);
    if (n[i]! + 1 < max0 && !(moveRatio(cv.gainAfterNext(i), uc) < top)) return false;
  }
  let usedR = f.state.usedR;
  let usedT = f.state.usedT;
  for (let k = 0; k < items.length; k++) {
    if (f.spentAt(usedR, usedT) || !f.fitsAt(usedR, usedT, 1, c0)) return false;
    usedR += 1;
    usedT += c0;
  }
  return true;
}
