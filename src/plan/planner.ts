import { RolloutBudgetError, badInput, counted, quote } from '../errors.js';
import { fnv1a } from '../math/hash.js';
import { behindWarning, nextStep } from '../posterior/decay.js';
import { expectedTokens } from '../posterior/length.js';
import type { StateSnapshot } from '../posterior/state.js';
import type { Registry } from '../registry.js';
import { startNeeds } from '../solver/bounds.js';
import { SLACK, type Solver, type SolverInput } from '../solver/types.js';
import type { ValueFunction } from '../value/functions.js';
import { cheapestTokens, infeasible, startingCount, unreachableMultiple } from './infeasible.js';
import { planLimits } from './limits.js';
import { resolvePlanOptions, validateBudget, type PlanOptionsInput } from './options.js';
import { checkCandidates } from './candidates.js';
import { firstRepeatedId } from './checked-ids.js';
import { buildPartialCurves, cheapestMixed, mixedOnly, partialBounds, readPartials } from './partial.js';
import type { PosteriorPolicy } from './policies.js';
import { freshUpperBounds } from './fresh-cap.js';
import { grownShareWarning, roundShare } from './rounds.js';
import { columnarPlan } from './columns.js';
import { posteriors } from './posteriors.js';
import type { Budget, Candidate, Plan, PlanColumns, PlanOptions } from './types.js';

/** The planner's extension points, by name (plan options `value`, `policy`, `solver`). */
export interface Registries {
  readonly values: Registry<ValueFunction>;
  /** Posterior policies: how p is taken from the posterior (plan/policies.ts). */
  readonly policies: Registry<PosteriorPolicy>;
  readonly solvers: Registry<Solver>;
}

/**
 * Plans one step, or one round of it: a pure function of (snapshot, candidates, budget,
 * options incl. seed). `budget` is what is left of the step; with `roundsLeft` > 1 the plan
 * spends this round's share of it (plan/rounds.ts). The story: posteriors (learned prior +
 * decayed evidence + this step's partial rewards) and expected lengths per candidate → the
 * posterior policy's value curves (conditional ones for partial groups) → the round's share
 * → the solver named by the options fills it → the plan, with every deliberate repair in its
 * warnings. O(N·(max_n if skip) + (N + B) log N) with the greedy solver. Throws
 * BUDGET_INFEASIBLE when even the whole budget left cannot give every prompt without partial
 * rewards min_n (skip off); BAD_INPUT on a bad candidate field (plan/candidates.ts) or duplicate ids.
 */
export function planStep(
  snapshot: StateSnapshot,
  candidates: readonly Candidate[],
  budget: Budget,
  optionsInput: PlanOptionsInput,
  registries: Registries,
): Plan {
  const options = checkPlanCall(budget, optionsInput, registries);
  // planStep is a library entry too (README: "the same computation without a store"): its
  // candidates are checked as Allocator.plan's are; an array a reader made is not checked again.
  // The plan itself is planChecked's, whose `candidates` is never reassigned (the closures that
  // read it keep a constant binding).
  return planChecked(snapshot, checkCandidates(candidates), budget, options, registries);
}

/**
 * A plan call's options and budget, checked before anything is read: the options resolved, the
 * budget validated, every name (policy, value, surplus_value, solver) registered. Allocator.plan
 * and the CLI's `plan` ask it before they read a state or a prompts file (a typo in a name was
 * answered after reading 10⁶ prompts: 2.2 s). O(1).
 */
export function checkPlanCall(budget: Budget, optionsInput: PlanOptionsInput, registries: Registries): PlanOptions {
  const options = resolvePlanOptions(optionsInput);
  validateBudget(budget);
  named('policy', registries.policies, options.policy);
  named('value', registries.values, options.value);
  named('surplus_value', registries.values, options.surplusValue);
  named('solver', registries.solvers, options.solver);
  return options;
}

function planChecked(
  snapshot: StateSnapshot,
  candidates: readonly Candidate[],
  budget: Budget,
  options: PlanOptions,
  registries: Registries,
): Plan {
  const policy = named('policy', registries.policies, options.policy);
  const value = named('value', registries.values, options.value);
  // One error for every unknown name (BAD_OPTION naming its field): the solver's was UNKNOWN_NAME without one.
  const surplusValue = named('surplus_value', registries.values, options.surplusValue);
  const solver = named('solver', registries.solvers, options.solver);
  const step = options.step ?? nextStep(snapshot.lastStep);
  const size = candidates.length;
  const warnings: string[] = [];
  // A step given far before the state's last: most often a new run on an old run's state.
  const behind = behindWarning('plan', step, snapshot.lastStep, options.decay);
  if (behind !== undefined) warnings.push(behind);

  const tieBreak = new Uint32Array(size);
  for (let i = 0; i < size; i++) tieBreak[i] = fnv1a(candidates[i]!.id);
  rejectDuplicateIds(candidates, tieBreak);

  // Rewards this step already gave (a later round): counted in the posterior, lengths included.
  const partials = readPartials(candidates);
  const tokensPerRollout = new Float64Array(size);
  // Prefill is charged only with a prefill weight: no array of zeros otherwise.
  const fixedTokens = options.prefillWeight > 0 ? new Float64Array(size) : undefined;
  const assumedLengths = { total: 0, withoutMaxTokens: 0 };
  let missingPromptTokens = 0;
  let fresh = 0; // candidates new to the state: no evidence, no partial rewards (the round share's u)
  // A single-round step: one plan for the whole step (roundsLeft 1, no partial rewards; also a
  // last round after every earlier rollout aborted). Nothing after it corrects the posteriors, so
  // it values with `balanced`'s single-round form (value/functions.ts balancedSingleRoundValue).
  const singleRound = options.roundsLeft === 1 && partials === undefined;
  // Which candidates are new, for the first round's bound (plan/fresh-cap.ts): only a round with rounds after it needs them.
  const isFresh = options.roundsLeft > 1 && partials === undefined ? new Uint8Array(size) : undefined;
  const estimate = { tokens: 0, assumed: false }; // each prompt's length estimate, in turn
  const { alpha, beta } = posteriors(snapshot, candidates, step, options, tieBreak, (i, s, a, b) => {
    const c = candidates[i]!;
    if ((s === undefined || s.rollouts === 0) && (partials === undefined || partials.groups[i]!.rollouts === 0)) {
      fresh++;
      if (isFresh !== undefined) isFresh[i] = 1;
    }
    const named = c.group ?? s?.group ?? null;
    const group = named === null ? undefined : snapshot.group(named);
    const pa = partials === undefined ? a : a + partials.successes[i]!;
    const pb = partials === undefined ? b : b + partials.failures[i]!;
    const est = expectedTokens(s, group, snapshot.all, pa / (pa + pb), c.max_tokens, options.length, estimate);
    tokensPerRollout[i] = est.tokens;
    if (est.assumed) {
      assumedLengths.total++;
      if (c.max_tokens === undefined) assumedLengths.withoutMaxTokens++;
    }
    if (fixedTokens !== undefined) {
      if (c.prompt_tokens === undefined) missingPromptTokens++;
      fixedTokens[i] = options.prefillWeight * (c.prompt_tokens ?? 0);
    }
  });
  if (partials !== undefined) {
    for (let i = 0; i < size; i++) {
      alpha[i] = alpha[i]! + partials.successes[i]!;
      beta[i] = beta[i]! + partials.failures[i]!;
    }
  }
  if (assumedLengths.total > 0) warnings.push(assumedLengthsWarning(assumedLengths, options.length.defaultTokens));
  if (missingPromptTokens > 0) warnings.push(`${missingPromptTokens} prompts have no prompt_tokens: their prefill counts as 0`);

  const limits = planLimits(size, budget, options.minN, options.maxN, tokensPerRollout, fixedTokens, options.multipleOf, partials?.groups); // plan/limits.ts
  warnings.push(...limits.warnings);

  const stepValue = singleRound ? (value.singleRound ?? value) : value;
  const policyInput = { candidates, alpha, beta, snapshot, value: stepValue, surplusValue, seed: options.seed, step };
  const built = partials === undefined ? policy.build(policyInput) : buildPartialCurves(policy, policyInput, partials.groups);
  const bounds = partials === undefined ? undefined : partialBounds(partials.groups, options.minN, limits.maxN);
  const input: SolverInput = {
    ...(bounds === undefined ? {} : { promptMinN: bounds.promptMinN, promptMaxN: bounds.promptMaxN }),
    curves: built.curves,
    ...(built.surplus === undefined ? {} : { surplus: built.surplus }),
    tokensPerRollout,
    ...(fixedTokens === undefined ? {} : { fixedTokens }),
    tieBreak,
    minN: options.minN,
    maxN: limits.maxN,
    skip: options.skip,
    rollouts: Infinity,
    tokens: Infinity,
    saturation: options.saturation,
    ...(options.multipleOf === undefined ? {} : { multipleOf: options.multipleOf }),
  };
  // This round's share of the budget left, grown where the prompts it must start need more
  // (with multiple_of k, to the multiple of k at or above what they need).
  const multiple = options.multipleOf ?? 1;
  const starts = startNeeds(input);
  // With multiple_of, the starts rounded up to the multiple, and the fewest tokens those take: a
  // round's token share grown to the starts' alone could not pay for the multiple (a step that
  // fits in one round was BUDGET_INFEASIBLE over two, "need ~200 tokens; budget left is 1000").
  const roundedUp = multiple * Math.ceil(starts.rollouts / multiple);
  const needs = { rollouts: roundedUp, tokens: roundedUp > starts.rollouts ? cheapestTokens(input, starts, roundedUp) : starts.tokens };
  const starting = startingCount(partials?.groups, size, options.skip);
  const share = roundShare(budget, options.roundsLeft, needs, size === 0 ? 0 : fresh / size, options.freshShare);
  const spend = share.budget;
  // The solver spends at most what the candidates can use (plan/limits.ts: a lone budget over
  // N·max_n is clamped, which changes no allocation and bounds the work).
  const budgets = { rollouts: Math.min(spend.rollouts ?? Infinity, limits.rollouts), tokens: Math.min(spend.tokens ?? Infinity, limits.tokens) };
  // A first round with rounds after it: a prompt new to the state gets at most a little over the
  // round's share a prompt (plan/fresh-cap.ts), a soft bound: lifted where it alone would leave the
  // round's budget unspent or the round infeasible (a multiple_of the bounded prompts cannot reach).
  const freshUpper = isFresh === undefined
    ? undefined
    : freshUpperBounds(isFresh, input.promptMaxN, limits.maxN, options.minN, options.roundsLeft, spend.rollouts, options.freshCap);
  let result = solver({ ...input, ...(freshUpper === undefined ? {} : { promptMaxN: freshUpper }), ...budgets });
  if (freshUpper !== undefined && (result.status !== 'optimal' || result.usedRollouts + multiple <= budgets.rollouts)) {
    const unbound = solver({ ...input, ...budgets });
    if (unbound.status === 'optimal' && (result.status !== 'optimal' || unbound.usedRollouts > result.usedRollouts)) result = unbound;
  }
  // Groups that already vary get no more this round (plan/partial.ts), unless the budget would
  // go unspent: then a second solve keeps every group of the first as it is and gives the mixed
  // groups what is left (the first's surplus rollouts counted with the second's).
  if (partials !== undefined && bounds !== undefined && bounds.mixed > 0 && result.status === 'optimal' && result.usedRollouts + multiple <= budgets.rollouts
    && (budgets.tokens === Infinity || result.usedTokens + multiple * cheapestMixed(partials.groups, tokensPerRollout, limits.maxN) <= budgets.tokens * (1 + SLACK))) {
    const first = result;
    const again = solver({ ...input, ...budgets, ...mixedOnly(partials.groups, first.n, limits.maxN) });
    if (again.status === 'optimal' && again.usedRollouts > first.usedRollouts && again.objective >= first.objective) {
      result = { ...again, surplusRollouts: first.surplusRollouts + again.surplusRollouts, upperBound: Math.max(first.upperBound, again.upperBound) };
    }
  }
  if (result.status === 'budget-infeasible') {
    throw unreachableMultiple(input, starts, needs, budget, multiple) ?? infeasible(needs, budget, options.minN, options.roundsLeft, starting, multiple, assumedLengths.total > 0 ? assumedLengthsWarning(assumedLengths, options.length.defaultTokens) : undefined);
  }
  if (result.status !== 'optimal') {
    throw new RolloutBudgetError('BAD_OPTION', `solver ${quote(options.solver)} gave up on ${size} prompts (status ${result.status}); use the greedy solver`, 2, ['solver']);
  }
  if (share.grown.length > 0) warnings.push(grownShareWarning(share, budget, options.roundsLeft, starting, options.minN));
  // A round's share is the planner's; only the budget a plan may spend whole is the caller's.
  if (multiple > 1 && options.roundsLeft === 1 && budget.rollouts !== undefined && budget.rollouts % multiple !== 0) {
    warnings.push(`budget_rollouts ${budget.rollouts} is not a multiple of multiple_of ${multiple}: at most ${multiple * Math.floor(budget.rollouts / multiple)} are planned`);
  }

  const columns = resultColumns(candidates, result.n, alpha, beta, tokensPerRollout, fixedTokens, options.interval);
  const values = columns.value;
  const curves = built.curves;
  let expected = 0;
  for (let j = 0; j < columns.length; j++) {
    const i = columns.index[j]!;
    const n = columns.n[j]!;
    expected += n * tokensPerRollout[i]! + (fixedTokens === undefined ? 0 : fixedTokens[i]!);
    values[j] = curves.cursorOf(i) === n ? curves.current(i) : curves.value(i, n);
  }
  const leftR = spend.rollouts === undefined ? 0 : multiple * Math.floor(spend.rollouts / multiple) - result.usedRollouts;
  if (leftR > 0 && spend.tokens === undefined) {
    warnings.push(`${leftR} rollouts of this plan's budget left unspent: every prompt is at max_n ${limits.maxN} or has no value left` +
      (multiple > 1 ? `, or the next multiple of multiple_of ${multiple} does not fit` : ''));
  }
  if (result.usedRollouts === 0 && size > 0 && partials === undefined) {
    // Nothing fits (with skip, a prompt may get 0): say so, or a loop repeats an empty step unexplained.
    let cheapest = Infinity;
    for (let i = 0; i < size; i++) cheapest = Math.min(cheapest, Math.max(1, options.minN) * tokensPerRollout[i]! + (fixedTokens === undefined ? 0 : fixedTokens[i]!));
    warnings.push(`nothing planned: no prompt's first ${Math.max(1, options.minN)} rollouts fit this plan's budget (` +
      [spend.rollouts === undefined ? '' : `${spend.rollouts} rollouts`, spend.tokens === undefined ? '' : `${spend.tokens} tokens, the cheapest prompt's needing ${Math.ceil(cheapest)}`].filter((x) => x !== '').join(', ') +
      '): raise the budget, or lower min_n or max_tokens');
  }
  const ub = result.upperBound;
  return columnarPlan({
    version: 1,
    step,
    seed: options.seed,
    policy: options.policy,
    value: options.value,
    budget: { rollouts: spend.rollouts ?? null, tokens: spend.tokens ?? null },
    ...(options.roundsLeft > 1 ? { rounds_left: options.roundsLeft, budget_left: { rollouts: budget.rollouts ?? null, tokens: budget.tokens ?? null } } : {}),
    totals: {
      prompts: columns.length,
      rollouts: result.usedRollouts,
      expected_tokens: Math.round(expected),
      objective: result.objective,
      upper_bound: ub,
      gap: ub > 0 ? Math.max(0, (ub - result.objective) / ub) : 0,
      surplus_rollouts: result.surplusRollouts,
    },
    warnings,
  }, columns);
}

/**
 * A registry lookup whose unknown name is BAD_OPTION naming the option (`policy`, `value`),
 * which the CLI shows as its flag and the service as its field: it read `unknown policy
 * "foo"; registered: ...` with neither.
 */
function named<T>(field: string, registry: Registry<T>, name: string): T {
  if (!registry.has(name)) throw new RolloutBudgetError('BAD_OPTION', `${field}: unknown name ${quote(name)}; registered: ${registry.names().join(', ')}`, 2, [field]);
  return registry.get(name);
}

/** The warning for prompts whose expected tokens per rollout are assumed, not learned. */
function assumedLengthsWarning(assumed: { total: number; withoutMaxTokens: number }, defaultTokens: number): string {
  const withMax = assumed.total - assumed.withoutMaxTokens;
  const how = [
    ...(withMax > 0 ? [`${withMax} at their max_tokens`] : []),
    ...(assumed.withoutMaxTokens > 0 ? [`${assumed.withoutMaxTokens} without max_tokens at ${defaultTokens}`] : []),
  ];
  return `${counted(assumed.total, 'prompt')} no length data (their own, their group's or any prompt's): expected tokens per rollout assumed, ${how.join(', ')}`;
}

/**
 * The plan's rows (prompts with n > 0) as columns, value left to fill. When every prompt is
 * planned the columns are the planner's own arrays; otherwise compacted copies.
 */
function resultColumns(
  candidates: readonly Candidate[],
  n: Int32Array,
  alpha: Float64Array,
  beta: Float64Array,
  tokensPerRollout: Float64Array,
  fixedTokens: Float64Array | undefined,
  interval: number,
): PlanColumns & { readonly value: Float64Array } {
  const size = candidates.length;
  let count = 0;
  for (let i = 0; i < size; i++) if (n[i] !== 0) count++;
  const index = new Int32Array(count);
  for (let i = 0, j = 0; i < size; i++) if (n[i] !== 0) index[j++] = i;
  const pick = (column: Float64Array) => (count === size ? column : Float64Array.from(index, (i) => column[i]!));
  const rows: Candidate[] = new Array(count);
  for (let j = 0; j < count; j++) rows[j] = candidates[index[j]!]!;
  return {
    length: count,
    candidates: rows,
    index,
    n: count === size ? n : Int32Array.from(index, (i) => n[i]!),
    tokensPerRollout: pick(tokensPerRollout),
    ...(fixedTokens === undefined ? {} : { prefillTokens: pick(fixedTokens) }),
    alpha: pick(alpha),
    beta: pick(beta),
    value: new Float64Array(count),
    interval,
  };
}

/**
 * Throws on a repeated candidate id (plan/checked-ids.ts: hashes sorted, or a reader's check
 * of the same ids reused; strings compared only on a collision).
 */
function rejectDuplicateIds(candidates: readonly Candidate[], hashes: Uint32Array): void {
  const repeat = firstRepeatedId(candidates, hashes);
  if (repeat !== undefined) {
    throw badInput(`candidate ${repeat.at + 1}`, `"id" ${quote(candidates[repeat.at]!.id)} repeats candidate ${repeat.before + 1}`);
  }
}
