import { betaIntervalFast } from '../math/beta.js';
import { PairCache } from '../math/pair-cache.js';
import type { Allocation, Candidate, Plan, PlanColumns } from './types.js';

/** Everything of a plan but its allocations. */
export type PlanHeader = Omit<Plan, 'allocations' | 'columns'>;

/** Plans whose `allocations` were read or replaced: their objects may differ from the columns now. */
const touched = new WeakSet<Plan>();

/**
 * A plan whose `allocations` are built from `columns` on first read, then kept: the planner
 * itself makes no object per prompt. `allocations` is an own enumerable property in its
 * contract place (so JSON.stringify, spreads and structuredClone see the usual plan), with a
 * setter, so callers can still replace it; `columns` is own but not enumerable, so it never
 * reaches the plan file.
 */
export function columnarPlan(header: PlanHeader, columns: PlanColumns): Plan {
  const { warnings, ...head } = header;
  let allocations: Allocation[] | undefined;
  // The placeholder fixes the key's place; redefining it as an accessor keeps that place.
  const plan: Plan = { ...head, allocations: [], warnings };
  Object.defineProperty(plan, 'allocations', {
    get: () => {
      touched.add(plan);
      return (allocations ??= allocationsOf(columns));
    },
    set: (list: Allocation[]) => {
      touched.add(plan);
      allocations = list;
    },
    enumerable: true,
    configurable: true,
  });
  Object.defineProperty(plan, 'columns', { value: columns, enumerable: false });
  return plan;
}

/**
 * The plan's columns while they still say all its allocations do: from the planner, and
 * `allocations` never read nor replaced (a reader may have edited the objects). Writers
 * (plan/serialize.ts) then format rows straight from the columns; else undefined.
 */
export function untouchedColumns(plan: Plan): PlanColumns | undefined {
  return touched.has(plan) ? undefined : plan.columns;
}

/** One row's allocation fields (an Allocation's, `first_rollout` always present: 0 stands for absent). */
export type AllocationFields = Required<Allocation>;

/**
 * Reads row j of `columns` into `out` (reused between rows, so a writer makes no object per
 * row), with the posterior's central `columns.interval` credible interval as [p_low, p_high].
 * The one definition of an allocation's fields: allocationsOf and the plan writers use it.
 * Without `posterior`, p_mean, p_low and p_high are left as they are: a writer that has the
 * text of a row's posterior already (plan/serialize.ts) reads them with posteriorReader only
 * when it has not. O(1) a row plus one quantile pair per distinct posterior (memoized).
 */
export function allocationReader(columns: PlanColumns, posterior = true): (j: number, out: AllocationFields) => AllocationFields {
  const { candidates, n, tokensPerRollout, alpha, beta, value } = columns;
  const fill = posteriorReader(columns);
  return (j, out) => {
    const c: Candidate = candidates[j]!;
    out.prompt_id = c.id;
    out.n = n[j]!;
    out.max_tokens = c.max_tokens ?? null;
    out.expected_tokens = Math.round(n[j]! * tokensPerRollout[j]!);
    if (posterior) fill(alpha[j]!, beta[j]!, out);
    out.value = value[j]!;
    out.first_rollout = c.partial_rewards?.length ?? 0;
    return out;
  };
}

/**
 * An allocation's posterior fields from its Beta(α, β): p_mean, and the central
 * `columns.interval` credible interval as [p_low, p_high]; a pure function of (α, β) for the
 * columns' interval.
 */
export function posteriorReader(columns: PlanColumns): (a: number, b: number, out: AllocationFields) => void {
  const interval = memoizedInterval((1 - columns.interval) / 2, columns.length);
  return (a, b, out) => {
    const q = interval(a, b); // indexed reads: destructuring takes V8's slow iterator path
    out.p_mean = a / (a + b);
    out.p_low = q[0];
    out.p_high = q[1];
  };
}

export const emptyFields = (): AllocationFields => ({
  prompt_id: '', n: 0, max_tokens: null, expected_tokens: 0, p_mean: 0, p_low: 0, p_high: 0, value: 0, first_rollout: 0,
});

/** The plan file's allocation objects of `columns`, row by row (allocationReader). O(rows). */
export function allocationsOf(columns: PlanColumns): Allocation[] {
  const read = allocationReader(columns);
  const row = emptyFields();
  const out: Allocation[] = new Array(columns.length);
  for (let j = 0; j < columns.length; j++) {
    read(j, row);
    out[j] = {
      prompt_id: row.prompt_id,
      n: row.n,
      max_tokens: row.max_tokens,
      expected_tokens: row.expected_tokens,
      p_mean: row.p_mean,
      p_low: row.p_low,
      p_high: row.p_high,
      value: row.value,
    };
    if (row.first_rollout > 0) out[j]!.first_rollout = row.first_rollout;
  }
  return out;
}

/** Quantile tables kept for the thread, by q: at most this many (a service plans at one or two intervals). */
const KEPT_INTERVALS = 4;
const kept = new Map<number, PairCache>();

/** How many quantile tables the thread keeps (at most KEPT_INTERVALS); for tests. */
export const intervalTablesKept = (): number => kept.size;

/**
 * [q, 1 − q] quantiles of Beta(α, β), memoized for the thread: posteriors repeat a lot
 * (counts are small integers and step gaps few), within a plan and across a service's plans,
 * and the exact quantile costs ~1.4 µs. A pure function of (q, α, β), so a kept table gives
 * the same bytes as a fresh one. Bounded: at most KEPT_INTERVALS tables of 2^12 to 2^16
 * slots (128 KB to 2 MB), a table regrown (a fresh one) when a larger plan needs more slots.
 */
function memoizedInterval(q: number, size: number): (a: number, b: number) => [number, number] {
  // At least 2 slots a prompt, 2^12 to 2^16: small plans do not pay for a big table.
  const bits = Math.min(16, Math.max(12, Math.ceil(Math.log2(2 * size + 1))));
  let cache = kept.get(q);
  if (cache === undefined || cache.bits < bits) {
    cache = new PairCache((a, b) => betaIntervalFast(q, a, b), bits);
    kept.delete(q);
    if (kept.size >= KEPT_INTERVALS) kept.delete(kept.keys().next().value!);
    kept.set(q, cache);
  }
  const table = cache;
  const out: [number, number] = [0, 0];
  return (a, b) => table.get(a, b, out);
}
