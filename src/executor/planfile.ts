import { badInput, quote } from '../errors.js';
import { parseJson } from '../io/jsonl.js';
import { MAX_N_LIMIT } from '../plan/limits.js';
import type { Plan } from '../plan/types.js';

/** Rollout indices stay below 2^30, so a rollout's seed (group seed < 2^30, plan/groups.ts) + j is an int32. */
const MAX_ROLLOUT_INDEX = 2 ** 30;

/** Parses a plan file (version 1, as `plan` writes it), checking the fields `execute` uses. */
export function parsePlan(text: string, name: string): Plan {
  let value: unknown;
  try {
    value = parseJson(text, name); // nesting depth limited, as every input file
  } catch (error) {
    const jsonl = jsonlKind(text);
    if (jsonl !== undefined) throw badInput(`${name}:2`, `a second JSON value: this is JSONL, one object a line${jsonl}, not the one JSON document of a plan file, as \`plan\` writes it by default (--format json)`);
    throw error;
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw badInput(name, `a plan must be a JSON object, got ${quote(value)}`);
  const plan = value as Record<string, unknown>;
  if (plan.version !== 1) throw badInput(name, `"version" must be 1, got ${quote(plan.version)}`);
  for (const key of ['step', 'seed'] as const) {
    const v = plan[key];
    if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0) throw badInput(name, `"${key}" must be a non-negative integer, got ${quote(v)}`);
  }
  const budget = plan.budget as Record<string, unknown> | undefined;
  if (budget === null || typeof budget !== 'object') throw badInput(name, `"budget" must be an object, got ${quote(budget)}`);
  if (budget.tokens !== null && (typeof budget.tokens !== 'number' || budget.tokens < 0)) {
    throw badInput(name, `"budget.tokens" must be a non-negative number or null, got ${quote(budget.tokens)}`);
  }
  if (!Array.isArray(plan.allocations)) throw badInput(name, `"allocations" must be an array, got ${quote(plan.allocations)}`);
  const seen = new Set<string>();
  plan.allocations.forEach((a: Record<string, unknown>, i: number) => {
    const where = `${name}: allocations[${i}]`;
    if (a === null || typeof a !== 'object') throw badInput(where, `must be an object, got ${quote(a)}`);
    if (typeof a.prompt_id !== 'string' || a.prompt_id === '') throw badInput(where, `"prompt_id" must be a non-empty string, got ${quote(a.prompt_id)}`);
    if (seen.has(a.prompt_id)) throw badInput(where, `"prompt_id" ${quote(a.prompt_id)} repeats`);
    seen.add(a.prompt_id);
    if (typeof a.n !== 'number' || !Number.isSafeInteger(a.n) || a.n < 0) throw badInput(where, `"n" must be a non-negative integer, got ${quote(a.n)}`);
    // A plan's group is at most max_n ≤ MAX_N_LIMIT rollouts: n = 1e9 had execute and grade
    // build a billion requests until the heap ran out.
    if (a.n > MAX_N_LIMIT) throw badInput(where, `"n" must be at most ${MAX_N_LIMIT} (the largest group a plan gives: max_n's limit), got ${a.n}`);
    if (a.first_rollout !== undefined && (typeof a.first_rollout !== 'number' || !Number.isSafeInteger(a.first_rollout) || a.first_rollout < 1)) {
      throw badInput(where, `"first_rollout" must be a positive integer when present, got ${quote(a.first_rollout)}`);
    }
    // Rollout j's seed is the group's seed (< 2^30) + j: a non-negative int32 while j < 2^30.
    if (a.first_rollout !== undefined && (a.first_rollout as number) + a.n > MAX_ROLLOUT_INDEX) {
      throw badInput(where, `"first_rollout" + "n" must be at most ${MAX_ROLLOUT_INDEX} (rollout j's seed is the group's seed + j, an int32), got ${quote(a.first_rollout)} + ${a.n}`);
    }
    if (a.max_tokens !== null && (typeof a.max_tokens !== 'number' || !Number.isSafeInteger(a.max_tokens) || a.max_tokens < 1)) {
      throw badInput(where, `"max_tokens" must be a positive integer or null, got ${quote(a.max_tokens)}`);
    }
  });
  return plan as unknown as Plan;
}

/**
 * What a JSONL text given in place of a plan file seems to be (a note in brackets, or '' when
 * its first line says nothing), or undefined when its first line is not a whole JSON object
 * followed by more lines. Called on the error path only.
 */
function jsonlKind(text: string): string | undefined {
  const newline = text.indexOf('\n');
  if (newline < 0 || text.slice(newline + 1).trim() === '') return undefined;
  let first: unknown;
  try {
    first = JSON.parse(text.slice(0, newline));
  } catch {
    return undefined;
  }
  if (first === null || typeof first !== 'object' || Array.isArray(first)) return undefined;
  const o = first as Record<string, unknown>;
  if (o.type === 'header') return ' (a plan written with --format jsonl)';
  if ('prompt_id' in o) return ' (results or a plan export, by its "prompt_id")';
  if ('id' in o) return ' (prompts, by its "id")';
  return '';
}
