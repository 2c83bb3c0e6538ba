import type { Filler } from './fill.js';
import { ratioWhereBudgetRunsOut } from './threshold.js';
import { moveRatio, SLACK } from './types.js';

/** Most prompts sampled to estimate the precommit threshold. */
const SAMPLE = 1024;
/** Below this many prompts the heap alone is fast enough. */
export const PRECOMMIT_MIN = 6 * SAMPLE;

type Checkpoint = { n: Int32Array; usedR: number; usedT: number; objective: number; surplusRollouts: number };

/**
 * The precommit of a large fill phase (fill.ts): above max(estimate, saturated) the heap
 * would take every move in turn, so they are committed in one pass (no move there is
 * saturated, so the heap order could not have stopped sooner). On large instances up to three
 * rounds, each on the budget the last left, so the heap only orders the last few percent. The
 * sample walk leaves sampled items' pending moves stale, so every round rebuilds them; a round
 * that overspends is undone. Leaves every item's pending move in the heap (not yet ordered).
 */
export function precommitRounds(f: Filler, saturated: number): void {
  const size = f.size;
  let fresh = true;
  // Extra rounds pay only where the heap would be large (each re-walks the sample).
  const rounds = size >= 16 * PRECOMMIT_MIN ? 3 : 1;
  for (let round = 0; round < rounds && !f.spent(); round++) {
    const estimate = estimateThreshold(f, saturated);
    fresh = false;
    // NaN: by the sample, every move above the saturation floor fits; then the heap would
    // take them all, one pop each, and stop at the floor: take them in one pass instead.
    const lambda = estimate > 0 ? Math.max(estimate, saturated) : estimate !== estimate ? saturated : NaN;
    if (!(lambda > 0)) break;
    const saved = checkpoint(f);
    f.heap.clear();
    if (!precommit(f, lambda)) {
      restore(f, saved);
      break;
    }
    fresh = true;
    if (f.budgetR - f.state.usedR < size / 16) break;
  }
  if (!fresh) {
    f.heap.clear();
    for (let i = 0; i < size; i++) f.collect(i);
  }
}

function checkpoint(f: Filler): Checkpoint {
  const s = f.state;
  return { n: Int32Array.from(s.n), usedR: s.usedR, usedT: s.usedT, objective: s.objective, surplusRollouts: s.surplusRollouts };
}

function restore(f: Filler, cp: Checkpoint): void {
  const s = f.state;
  s.n.set(cp.n);
  s.usedR = cp.usedR;
  s.usedT = cp.usedT;
  s.objective = cp.objective;
  s.surplusRollouts = cp.surplusRollouts;
  for (let i = 0; i < f.size; i++) f.cv.seek(i, s.n[i]!);
}

/**
 * A ratio λ such that the moves above it very likely fit both budgets: where a
 * deterministic sample's cumulative cost, scaled to all prompts, reaches 90% of what is
 * left. Sampled items are walked down to the saturation `floor` and put back where they
 * were. O(sample · moves).
 */
function estimateThreshold(f: Filler, floor: number): number {
  const { size, state, input } = f;
  const c = input.tokensPerRollout;
  // About size/16 prompts (256 to SAMPLE), each walked to max_n: a value that keeps paying
  // for deep groups (knapsack on hard prompts) is then counted in full.
  const stride = Math.ceil(size / Math.min(SAMPLE, Math.max(256, size >> 4)));
  const sampled = Math.ceil(size / stride);
  let most = input.maxN;
  if (f.upper !== undefined) for (let i = 0; i < size; i += stride) most = Math.max(most, f.upper[i]!);
  const room = sampled * (most + 1);
  const logRatios = new Float64Array(room);
  const costR = new Float64Array(room);
  const costT = new Float64Array(room);
  let m = 0;
  // Sampled items in one shared curve state with the same cost and bound walk the same moves:
  // the first walks, the others copy its moves (and end as it does, sought back to n0).
  const walked = new Map<string, { from: number; to: number; gain: number }>();
  const stateOf = f.cv.stateOf?.bind(f.cv);
  for (let i = 0; i < size; i += stride) {
    const n0 = state.n[i]!;
    const shared = n0 > 0 && stateOf !== undefined ? stateOf(i) : -1;
    const key = shared >= 0 ? `${shared} ${c[i]} ${f.maxOf(i)}` : '';
    const same = shared >= 0 ? walked.get(key) : undefined;
    if (same !== undefined) {
      logRatios.copyWithin(m, same.from, same.to);
      costR.copyWithin(m, same.from, same.to);
      costT.copyWithin(m, same.from, same.to);
      m += same.to - same.from;
      if (n0 < f.maxOf(i)) f.gain[i] = same.gain; // the pending gain the walk's last keyOf left
      f.cv.seek(i, n0);
      continue;
    }
    const from = m;
    while (state.n[i]! < f.maxOf(i)) {
      const key = f.keyOf(i);
      // Moves under the saturation floor are never taken in this phase: stop there.
      if (!(key > 0) || key < floor) break;
      const n = state.n[i]!;
      const r = n === 0 ? f.jumpTo[i]! : 1;
      logRatios[m] = Math.log(key);
      costR[m] = r;
      costT[m++] = r * c[i]! + (n === 0 ? f.fixed(i) : 0);
      if (n === 0) state.n[i] = f.jumpTo[i]!;
      else {
        f.cv.advance(i);
        state.n[i] = n + 1;
      }
    }
    state.n[i] = n0;
    f.cv.seek(i, n0);
    if (shared >= 0) walked.set(key, { from, to: m, gain: f.gain[i]! });
  }
  const share = (sampled / size) * 0.9;
  const sample = { logRatios, costR, costT, count: m };
  return ratioWhereBudgetRunsOut(sample, (f.budgetR - state.usedR) * share, (f.budgetT - state.usedT) * share);
}

/**
 * Takes, for every item, all pending moves with a ratio above λ: exactly the moves the heap
 * would pop first, and collects each item's next move for the heap. Returns false (the
 * caller restores the checkpoint) if they overspend a budget, where the heap would have
 * dropped moves.
 */
function precommit(f: Filler, lambda: number): boolean {
  const { state, cv, input } = f;
  const tracked = f.track !== undefined;
  const c = input.tokensPerRollout;
  for (let i = 0; i < f.size; i++) {
    while (state.n[i]! === 0) {
      const key = f.keyOf(i);
      if (!(key > lambda)) break;
      f.take(i);
    }
    let n = state.n[i]!;
    if (n === 0) {
      f.collect(i);
      continue;
    }
    const uc = f.unitCost(i);
    let g = NaN;
    let taken = 0;
    if (cv.advanceWhile !== undefined) {
      taken = cv.advanceWhile(i, uc, lambda, f.maxOf(i));
      if (!tracked) state.objective += cv.walkGain!;
      g = cv.walkNext!;
      n += taken;
    } else {
      const maxN = f.maxOf(i);
      while (n < maxN) {
        g = cv.nextGain(i);
        if (!(moveRatio(g, uc) > lambda)) break;
        if (!tracked) state.objective += g;
        cv.advance(i);
        n++;
        taken++;
        g = NaN;
      }
    }
    state.n[i] = n;
    state.usedR += taken;
    state.usedT += taken * c[i]!;
    if (!f.primary) state.surplusRollouts += taken;
    if (g === g) {
      f.gain[i] = g;
      f.heap.append(moveRatio(g, uc), i);
    }
  }
  return state.usedR <= f.budgetR && state.usedT <= f.budgetT * (1 + SLACK);
}
