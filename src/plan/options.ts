import { badOption, quote, sameNameIn } from '../errors.js';
import { checkDecay, defaultDecay, stepTooLarge } from '../posterior/decay.js';
import { defaultLengthOptions } from '../posterior/length.js';
import { defaultPriorOptions } from '../posterior/prior.js';
import { isFreshCap } from './fresh-cap.js';
import { checkMinNLimit } from './limits.js';
import type { Budget, PlanOptions } from './types.js';

export const defaultPlanOptions: PlanOptions = {
  minN: 2,
  maxN: 64,
  skip: false,
  policy: 'bayes',
  value: 'balanced',
  seed: 0,
  prefillWeight: 0,
  surplusValue: 'hit',
  saturation: 0.02,
  interval: 0.9,
  decay: defaultDecay,
  prior: defaultPriorOptions,
  length: defaultLengthOptions,
  roundsLeft: 1,
  freshShare: 0.7,
  freshCap: 1.2,
  solver: 'greedy',
};

/**
 * Rounds a step is planned and generated in by the loops that generate themselves (`loop`,
 * replay, simulate, demo: plan/round-loop.ts): half the budget, then the rest with the first
 * half's rewards as each prompt's `partial_rewards`. One `plan` call is one round; its share of
 * the budget left is plan/rounds.ts's rule.
 */
export const defaultRounds = 2;

export type PlanOptionsInput = Partial<Omit<PlanOptions, 'decay' | 'prior' | 'length'>> & {
  decay?: Partial<PlanOptions['decay']>;
  prior?: Partial<PlanOptions['prior']>;
  length?: Partial<PlanOptions['length']>;
};

/** Per-call options over defaults, the nested groups key by key; both checked first (checkOptionKeys). */
export function mergePlanOptions(defaults: PlanOptionsInput, options: PlanOptionsInput): PlanOptionsInput {
  // Before the spread, which turns a group that is not an object (`decay: 0.99`) into {}.
  checkOptionKeys(defaults, 'defaults');
  checkOptionKeys(options, 'options');
  return {
    ...defaults,
    ...options,
    decay: { ...defaults.decay, ...options.decay },
    prior: { ...defaults.prior, ...options.prior },
    length: { ...defaults.length, ...options.length },
  };
}

/** Merges options key by key (`??`, never `||`: 0 is a valid value) and validates them. */
export function resolvePlanOptions(input: PlanOptionsInput = {}): PlanOptions {
  checkOptionKeys(input);
  const d = defaultPlanOptions;
  const options: PlanOptions = {
    minN: input.minN ?? d.minN,
    maxN: input.maxN ?? d.maxN,
    skip: input.skip ?? d.skip,
    policy: input.policy ?? d.policy,
    value: input.value ?? d.value,
    seed: input.seed ?? d.seed,
    prefillWeight: input.prefillWeight ?? d.prefillWeight,
    surplusValue: input.surplusValue ?? d.surplusValue,
    saturation: input.saturation ?? d.saturation,
    interval: input.interval ?? d.interval,
    decay: {
      forgetPerStep: input.decay?.forgetPerStep ?? d.decay.forgetPerStep,
      reobserveDiscount: input.decay?.reobserveDiscount ?? d.decay.reobserveDiscount,
    },
    prior: {
      minPrompts: input.prior?.minPrompts ?? d.prior.minPrompts,
      minStrength: input.prior?.minStrength ?? d.prior.minStrength,
      maxStrength: input.prior?.maxStrength ?? d.prior.maxStrength,
      hintMinPrompts: input.prior?.hintMinPrompts ?? d.prior.hintMinPrompts,
      hintMaxStrength: input.prior?.hintMaxStrength ?? d.prior.hintMaxStrength,
      hintDefaultStrength: input.prior?.hintDefaultStrength ?? d.prior.hintDefaultStrength,
    },
    length: {
      shrinkage: input.length?.shrinkage ?? d.length.shrinkage,
      defaultTokens: input.length?.defaultTokens ?? d.length.defaultTokens,
    },
    roundsLeft: input.roundsLeft ?? d.roundsLeft,
    freshShare: input.freshShare ?? d.freshShare,
    freshCap: input.freshCap ?? d.freshCap,
    solver: input.solver ?? d.solver,
    ...(input.step === undefined ? {} : { step: input.step }),
    ...(input.multipleOf === undefined ? {} : { multipleOf: input.multipleOf }),
  };
  requireInt('min_n', options.minN, 1);
  checkMinNLimit(options.minN); // before max_n's default: a larger max_n would not help
  if (input.maxN === undefined && Number.isSafeInteger(options.maxN) && options.maxN < options.minN) {
    // max_n was not given: name min_n, which was (it read "max_n must be an integer ≥ 5000, got 64").
    throw badOption(`min_n ${options.minN} is above max_n's default of ${options.maxN}: give max_n too (at least ${options.minN})`, ['min_n', 'max_n']);
  }
  requireInt('max_n', options.maxN, options.minN);
  requireInt('seed', options.seed, 0);
  if (options.step !== undefined) {
    requireInt('step', options.step, 0);
    const large = stepTooLarge(options.step);
    if (large !== undefined) throw badOption(`step ${large}`, ['step']);
  }
  if (options.multipleOf !== undefined) requireInt('multiple_of', options.multipleOf, 1);
  // The CLI's --prefill-weight range: the service and the library took 1e7 the CLI refused.
  requireRange('prefill_weight', options.prefillWeight, 0, MAX_PREFILL_WEIGHT, true);
  requireRange('saturation', options.saturation, 0, 1);
  requireRange('interval', options.interval, 0, 1, true);
  checkDecay(options.decay); // the rule a store's apply checks too
  if (typeof options.skip !== 'boolean') throw badOption(`skip must be true or false, got ${quote(options.skip)}`, ['skip']);
  requireInt('rounds_left', options.roundsLeft, 1);
  requireRange('fresh_share', options.freshShare, 0, 1, true);
  if (!isFreshCap(options.freshCap)) {
    throw badOption(`fresh_cap must be 0 (no cap) or a number ≥ 1, got ${quote(options.freshCap)}`, ['fresh_cap']);
  }
  // The groups only the library takes (no flag, no body field): a prior of 0 prompts or of no
  // strength, or a length of no weight, gave NaN posteriors and plans of min_n everywhere.
  requireInt('prior.min_prompts', options.prior.minPrompts, 1);
  requireFinite('prior.min_strength', options.prior.minStrength, Number.MIN_VALUE);
  requireFinite('prior.max_strength', options.prior.maxStrength, options.prior.minStrength);
  requireInt('prior.hint_min_prompts', options.prior.hintMinPrompts, 3);
  requireFinite('prior.hint_max_strength', options.prior.hintMaxStrength, options.prior.minStrength);
  requireFinite('prior.hint_default_strength', options.prior.hintDefaultStrength, 0);
  requireFinite('length.shrinkage', options.length.shrinkage, 0);
  requireInt('length.default_tokens', options.length.defaultTokens, 1);
  return options;
}

/** Validates a budget: integers ≥ 0, at least one set, no other key. */
export function validateBudget(budget: Budget): void {
  checkKeys(budget, BUDGET_KEYS, 'budget', 'field');
  if (budget.rollouts === undefined && budget.tokens === undefined) {
    throw badOption('a budget is required: give budget_rollouts, budget_tokens, or both', ['budget_rollouts', 'budget_tokens']);
  }
  if (budget.rollouts !== undefined) requireInt('budget_rollouts', budget.rollouts, 0);
  if (budget.tokens !== undefined) requireInt('budget_tokens', budget.tokens, 0);
}

/** The largest prefill weight (tokens charged per prompt token), the same for the CLI, the service and the library. */
export const MAX_PREFILL_WEIGHT = 1e6;

function requireInt(name: string, value: number, min: number): void {
  if (!Number.isSafeInteger(value) || value < min) {
    throw badOption(`${name} must be an integer ≥ ${min}, got ${quote(value)}`, [name]);
  }
}

function requireFinite(name: string, value: number, min: number): void {
  if (!Number.isFinite(value) || value < min) {
    throw badOption(`${name} must be a finite number ${min === Number.MIN_VALUE ? '> 0' : `≥ ${min}`}, got ${quote(value)}`, [name]);
  }
}

function requireRange(name: string, value: number, lo: number, hi: number, closedHi = false): void {
  const ok = Number.isFinite(value) || value === Infinity ? value >= lo && (closedHi ? value <= hi : value < hi || hi === Infinity) : false;
  if (!ok) throw badOption(`${name} must be in [${lo}, ${hi}${closedHi ? ']' : ')'}, got ${quote(value)}`, [name]);
}

const OPTION_KEYS = [...Object.keys(defaultPlanOptions), 'step', 'multipleOf'];
const GROUP_KEYS = { decay: Object.keys(defaultDecay), prior: Object.keys(defaultPriorOptions), length: Object.keys(defaultLengthOptions) };
const BUDGET_KEYS = ['rollouts', 'tokens'];

/**
 * A library caller's options hold only PlanOptionsInput's keys, and its groups (decay, prior,
 * length) are objects of theirs. A key misspelt, or written as errors, flags and the service
 * name it (`min_n` for `minN`), was ignored and its default used; `decay: 0.99` (the service's
 * field) dropped the group; a null value was taken for "not given". `where` names the object in
 * the message (`defaults`, `options`).
 */
export function checkOptionKeys(input: unknown, where = 'options'): void {
  const options = objectAt(where, input, 'an object of plan options');
  checkKeys(options, OPTION_KEYS, where);
  for (const [group, keys] of Object.entries(GROUP_KEYS)) {
    const value = options[group];
    if (value !== undefined) checkKeys(objectAt(`${where}.${group}`, value, `an object {${keys.join(', ')}}`), keys, `${where}.${group}`);
  }
}

function objectAt(where: string, value: unknown, expected: string): Record<string, unknown> {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw badOption(`${where} must be ${expected}, got ${quote(value)}`);
  return value as Record<string, unknown>;
}

/** The same for the keys of any options object of the library's (AllocatorOptions). */
export function checkKnownKeys(object: unknown, known: readonly string[], where: string): void {
  checkKeys(objectAt(where, object, `an object {${known.join(', ')}}`), known, where);
}

function checkKeys(object: object, known: readonly string[], where: string, noun = 'option'): void {
  for (const key of Object.keys(object)) {
    // `?? default` took a null as "not given": `{ seed: null }` (a JSON config's) planned at seed 0, silently.
    if ((object as Record<string, unknown>)[key] === null) throw badOption(`${where}.${key} is null: leave the ${noun} out for its default, or give a value`);
    if (known.includes(key)) continue;
    const near = sameNameIn(key, known);
    const hint = near === undefined ? '' : `; the library's name for it is ${near}`;
    // No fields: a front end's renaming (min_n → --min-n) would garble the names this message compares.
    throw badOption(`${where}.${key}: unknown ${noun} ${quote(key)}${hint} (expected one of ${known.join(', ')})`);
  }
}
