import { RolloutBudgetError, badInput, quote, sameNameIn, withFieldNames } from '../errors.js';
import { batchOf, checkCandidate, parseResults, type ResultBatch } from '../io/formats.js';
import { storedTextProblem } from '../fields.js';
import { MAX_JSON_DEPTH, nestedDeeperThan, parseJson } from '../io/jsonl.js';
import { MAX_TOKEN_COUNT } from '../posterior/length.js';
import { MAX_STEP } from '../posterior/decay.js';
import { resolvePlanOptions, type PlanOptionsInput } from '../plan/options.js';
import { optionsFromFields, PLAN_OPTION_FIELDS } from '../option-fields.js';
import type { Registries } from '../plan/planner.js';
import { noteFieldsChecked } from '../plan/checked-ids.js';
import type { Budget, Candidate } from '../plan/types.js';
import { parseJsonFast, plainCandidateId } from './fast-checks.js';

/**
 * Request bodies of the service, validated like the CLI's inputs: every mistake throws
 * BAD_INPUT naming the field path and quoting the value, before anything is read or written.
 * Field names are the CLI's flags in snake_case.
 */
export interface PlanRequest {
  readonly candidates: Candidate[];
  readonly budget: Budget;
  readonly options: PlanOptionsInput;
}

export interface ObserveRequest {
  readonly batch: ResultBatch;
  readonly options: PlanOptionsInput;
}

type Json = Record<string, unknown>;

const isObject = (v: unknown): v is Json => v !== null && typeof v === 'object' && !Array.isArray(v);

function object(where: string, v: unknown): Json {
  if (!isObject(v)) throw badInput(where, `must be a JSON object, got ${quote(v)}`);
  return v;
}

function onlyKeys(where: string, obj: Json, allowed: readonly string[]): void {
  for (const key of Object.keys(obj)) {
    if (allowed.includes(key)) continue;
    const near = sameNameIn(key, allowed);
    throw badInput(`${where}.${key}`, `unknown field ${quote(key)}${near === undefined ? '' : ` (the service's name for it is ${near})`}; expected one of ${allowed.join(', ')}`);
  }
}

/** Parses a JSON body; a malformed or too deeply nested one is a 400 quoting the start of the text. */
export function parseJsonBody(text: string): unknown {
  return parseJson(text, 'body');
}

function int(where: string, v: unknown, min: number): number {
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < min) throw badInput(where, `must be an integer ≥ ${min}, got ${quote(v)}`);
  return v;
}

function num(where: string, v: unknown): number {
  if (typeof v !== 'number' || !Number.isFinite(v)) throw badInput(where, `must be a finite number, got ${quote(v)}`);
  return v;
}

function str(where: string, v: unknown): string {
  if (typeof v !== 'string' || v.length === 0) throw badInput(where, `must be a non-empty string, got ${quote(v)}`);
  const problem = storedTextProblem(v);
  if (problem !== undefined) throw badInput(where, `${problem}, got ${quote(v)}`);
  return v;
}

/** The prompt id of GET /v1/prompts/{id}, percent-decoded and checked like an id in a body. */
export function promptIdOf(encoded: string): string {
  let id: string;
  try {
    id = decodeURIComponent(encoded);
  } catch {
    throw badInput('path', `malformed percent-encoding in the prompt id, got ${quote(encoded)}`);
  }
  if (id === '') throw badInput('path', 'the prompt id is empty, got ""');
  const problem = storedTextProblem(id);
  if (problem !== undefined) throw badInput('path', `the prompt id ${problem}, got ${quote(id)}`);
  return id;
}

/** The options a plan request takes (src/option-fields.ts), and observe's: the decay pair. */
const OPTION_KEYS = PLAN_OPTION_FIELDS.map((f) => f.field);
const DECAY_KEYS = PLAN_OPTION_FIELDS.filter((f) => f.group === 'decay').map((f) => f.field);

/** Options object → PlanOptionsInput, each field of `allowed` by its JSON type; ranges are checked by resolvePlanOptions. */
export function optionsOf(v: unknown, where = 'body.options', allowed: readonly string[] = OPTION_KEYS): PlanOptionsInput {
  if (v === undefined) return {};
  const o = object(where, v);
  onlyKeys(where, o, allowed);
  const out = optionsFromFields((f) => {
    const value = o[f.field];
    if (value === undefined) return undefined;
    const at = `${where}.${f.field}`;
    switch (f.kind) {
      case 'int': return int(at, value, f.min!);
      case 'number': return num(at, value);
      case 'name': return str(at, value);
      case 'boolean':
        if (typeof value !== 'boolean') throw badInput(at, `must be true or false, got ${quote(value)}`);
        return value;
    }
  }, PLAN_OPTION_FIELDS.filter((f) => allowed.includes(f.field)));
  try {
    resolvePlanOptions(out); // ranges, with the option's path in the message
  } catch (error) {
    const m = error instanceof RolloutBudgetError ? /^([a-z_]+) (must .*)$/s.exec(error.message) : null;
    if (m === null) throw error;
    throw badInput(`${where}.${m[1]}`, m[2]!);
  }
  return out;
}

/** Policy and value names must be registered: checked here so the error names the field. */
export function checkNames(options: PlanOptionsInput, registries: Registries, where = 'body.options'): void {
  const check = (key: 'policy' | 'value', registry: Registries['policies'] | Registries['values']) => {
    const name = options[key];
    if (name !== undefined && !registry.has(name)) {
      throw badInput(`${where}.${key}`, `must be a registered ${registry.kind} (${registry.names().join(', ')}), got ${quote(name)}`);
    }
  };
  check('policy', registries.policies);
  check('value', registries.values);
}

function candidatesOf(v: unknown): Candidate[] {
  if (!Array.isArray(v)) throw badInput('body.candidates', `must be an array of prompts ({"id": ...}), got ${quote(v)}`);
  const seen = new Map<string, number>();
  const out: Candidate[] = [];
  for (let i = 0; i < v.length; i++) {
    const item: unknown = v[i];
    // A plain candidate is checked without naming its place; any other, the careful way.
    const id = plainCandidateId(item) ?? checkCandidate(`body.candidates[${i}]`, object(`body.candidates[${i}]`, item));
    const before = seen.get(id);
    if (before !== undefined) throw badInput(`body.candidates[${i}]`, `"id" ${quote(id)} repeats body.candidates[${before}]`);
    seen.set(id, i);
    out.push(item as Candidate);
  }
  noteFieldsChecked(out); // checked here: the allocator does not check them again
  return out;
}

function budgetOf(v: unknown): Budget {
  const b = object('body.budget', v);
  onlyKeys('body.budget', b, ['rollouts', 'tokens']);
  if (b.rollouts === undefined && b.tokens === undefined) throw badInput('body.budget', `needs "rollouts", "tokens" or both, got ${quote(b)}`);
  return {
    ...(b.rollouts === undefined ? {} : { rollouts: int('body.budget.rollouts', b.rollouts, 0) }),
    ...(b.tokens === undefined ? {} : { tokens: int('body.budget.tokens', b.tokens, 0) }),
  };
}

/** `{candidates: [...], budget: {rollouts?, tokens?}, options?: {...}}`. */
export function planRequestOf(text: string): PlanRequest {
  const body = object('body', parseJsonFast(text, 'body'));
  onlyKeys('body', body, ['candidates', 'budget', 'options']);
  misplacedBudget(body.options);
  return { candidates: candidatesOf(body.candidates), budget: budgetOf(body.budget), options: optionsOf(body.options) };
}

/** The CLI's budget flags written into "options" (`budget_rollouts`, as the library's input names them): were a 400 for a missing body.budget, or an unknown option listing the options. */
function misplacedBudget(options: unknown): void {
  if (!isObject(options)) return;
  const key = ['budget', 'budget_rollouts', 'budget_tokens'].find((k) => options[k] !== undefined);
  if (key === undefined) return;
  throw badInput(`body.options.${key}`, `unknown field ${quote(key)}: the budget is not an option; send it beside "options", as "budget": {"rollouts": <int>, "tokens": <int>} (either or both)`);
}

/**
 * Results as a JSON array, as `{results: [...], options?: {decay, reobserve_discount}}`, or as
 * NDJSON (the results JSONL format, one rollout or group per line).
 */
export function observeRequestOf(text: string): ObserveRequest {
  const head = text.trimStart();
  if (head.startsWith('[')) {
    const items = parseJsonBody(text) as unknown[];
    return { batch: batchOf(items, 'body'), options: {} };
  }
  if (nestedDeeperThan(text, MAX_JSON_DEPTH)) parseJson(text, 'body'); // throws, naming the limit
  let whole: unknown;
  try {
    whole = JSON.parse(text);
  } catch {
    whole = undefined; // NDJSON with several lines, or malformed: parseResults names the line
  }
  if (isObject(whole) && whole.results !== undefined) {
    onlyKeys('body', whole, ['results', 'options']);
    if (!Array.isArray(whole.results)) throw badInput('body.results', `must be an array of results, got ${quote(whole.results)}`);
    return { batch: batchOf(whole.results, 'body.results'), options: optionsOf(whole.options, 'body.options', DECAY_KEYS) };
  }
  // {"options": {...}} alone was read as one NDJSON result and named "body:1.prompt_id".
  if (isObject(whole) && whole.options !== undefined && whole.prompt_id === undefined) {
    throw badInput('body.results', `missing: a body with "options" needs its results, {"results": [...], "options": {...}}; got the keys ${Object.keys(whole).map((k) => quote(k)).join(', ')}`);
  }
  if (head === '') throw badInput('body', 'no results: send a JSON array, {"results": [...]}, or NDJSON lines');
  return { batch: parseResults(text, 'body'), options: {} };
}

/** Query of GET /v1/prompts/{id}: group, max_tokens, step. */
export function promptQueryOf(query: URLSearchParams): { candidate: Partial<Candidate>; options: PlanOptionsInput } {
  const candidate: { group?: string; max_tokens?: number } = {};
  const options: PlanOptionsInput = {};
  for (const key of query.keys()) {
    if (!['group', 'max_tokens', 'step'].includes(key)) throw badInput(`query.${key}`, `unknown parameter ${quote(key)}; expected group, max_tokens, step`);
    // ?step=1&step=2 took the first silently.
    if (query.getAll(key).length > 1) throw badInput(`query.${key}`, `must be given once, got ${query.getAll(key).length} values: ${query.getAll(key).map(quote).join(', ')}`);
  }
  const intParam = (k: string, min: number, max = Number.MAX_SAFE_INTEGER): number | undefined => {
    const raw = query.get(k);
    if (raw === null) return undefined;
    if (!/^\d+$/.test(raw) || !Number.isSafeInteger(Number(raw)) || Number(raw) < min || Number(raw) > max) {
      throw badInput(`query.${k}`, `must be an integer from ${min} to ${max}, got ${quote(raw)}`);
    }
    return Number(raw);
  };
  const group = query.get('group');
  if (group !== null) candidate.group = str('query.group', group);
  const maxTokens = intParam('max_tokens', 1, MAX_TOKEN_COUNT);
  if (maxTokens !== undefined) candidate.max_tokens = maxTokens;
  // The planner's largest step (its decay counts steps): above it was a 400 naming options.step, a field never sent.
  const step = intParam('step', 0, MAX_STEP);
  return { candidate, options: step === undefined ? options : { step } };
}

/** The library's option fields as request body fields (errors name what the caller sent). */
const bodyFieldOf: Readonly<Record<string, string>> = {
  budget_rollouts: 'budget.rollouts',
  budget_tokens: 'budget.tokens',
  ...Object.fromEntries(OPTION_KEYS.map((k) => [k, `options.${k}`])),
};

/** `{error: {code, message, field?, value?}}` for a caller mistake; field and value when the message names them. */
export function errorBody(thrown: RolloutBudgetError): { error: { code: string; message: string; field?: string; value?: string; retryable?: true } } {
  const error = withFieldNames(thrown, bodyFieldOf);
  const unknown = /^unknown (\w+) ("[^"]*")/.exec(error.message);
  if (unknown !== null) return { error: { code: error.code, message: error.message, field: unknown[1]!, value: unknown[2]! } };
  // "body.options.polcy: unknown field "polcy"; ...", "options.policy: unknown name "foo"; ...",
  // "query.foo: unknown parameter "foo"; ...": the place and the name.
  const named = /^(\S+|query\.[^:]+): unknown (?:field|name|parameter) ("(?:[^"\\]|\\.)*")/.exec(error.message);
  if (named !== null) return { error: { code: error.code, message: error.message, field: named[1]!, value: named[2]! } };
  // 'body.candidates[2]: "id" "a" repeats body.candidates[0]': the repeating field and its value.
  const repeats = /^(\S+): "([^"]+)" ("(?:[^"\\]|\\.)*") repeats /.exec(error.message);
  if (repeats !== null) return { error: { code: error.code, message: error.message, field: `${repeats[1]!}.${repeats[2]!}`, value: repeats[3]! } };
  const m = /^(?:(\S+): )?(?:"([^"]+)" )?.*?got (.*?)(?:\. .*)?$/s.exec(error.message);
  const where = m?.[1];
  const key = m?.[2];
  const fieldPath = where !== undefined && key !== undefined ? `${where}.${key}` : (where ?? key ?? /^([a-z_]+) must/.exec(error.message)?.[1]);
  return {
    error: {
      code: error.code,
      message: error.message,
      ...(fieldPath === undefined ? {} : { field: fieldPath }),
      ...(m?.[3] === undefined ? {} : { value: m[3] }),
      ...(thrown.retryable ? { retryable: true as const } : {}),
    },
  };
}
