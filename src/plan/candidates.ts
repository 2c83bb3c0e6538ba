import { badInput, quote } from '../errors.js';
import { field } from '../fields.js';
import { fieldsChecked, noteFieldsChecked } from './checked-ids.js';
import type { Candidate } from './types.js';

/**
 * Checks one candidate's fields (a prompts line, a service request's candidate) and returns
 * its id; throws BAD_INPUT naming `where`, the field and the value. Unknown fields are kept.
 */
export function checkCandidate(where: string, value: Record<string, unknown>): string {
  const id = field.string(where, value, 'id', true)!;
  field.tokens(where, value, 'prompt_tokens', 0);
  field.tokens(where, value, 'max_tokens', 1);
  field.string(where, value, 'group', false);
  field.rewards(where, value, 'partial_rewards');
  field.hint(where, value);
  return id;
}

/**
 * A library caller's candidates, checked as a prompts file's lines are (checkCandidate), errors
 * naming `candidates[i]`: a `max_tokens` of -5 or NaN, an `id` of 7 or "", a `group` of 5 were
 * planned (the group stored as the text '5.0'). An array a reader made (parsePromptsAt, the
 * service's request parser: plan/checked-ids.ts) was checked as it was read and is not again.
 * Returns that array, or a copy of the caller's marked checked, for the calls after this one
 * (Allocator.plan, then planStep: 16–50 ms at 10⁵ candidates checked twice); the caller's own
 * array stays unmarked, so a candidate it changes later is checked again. O(N).
 */
export function checkCandidates(candidates: unknown): readonly Candidate[] {
  if (!Array.isArray(candidates)) throw badInput('candidates', `must be an array of candidates ({"id": ...}), got ${quote(candidates)}`);
  if (fieldsChecked(candidates)) return candidates as readonly Candidate[];
  for (let i = 0; i < candidates.length; i++) {
    const where = `candidates[${i}]`;
    const value: unknown = candidates[i];
    if (value === null || typeof value !== 'object' || Array.isArray(value)) throw badInput(where, `each candidate must be an object with an "id", got ${quote(value)}`);
    checkCandidate(where, value as Record<string, unknown>);
  }
  const checked = candidates.slice() as Candidate[];
  noteFieldsChecked(checked);
  return checked;
}
