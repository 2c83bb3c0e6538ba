import { collidingHashes, firstRepeat } from '../math/hash.js';
import type { Candidate } from './types.js';

/**
 * What a reader learnt when it checked a candidate array's ids for repeats (io/formats.ts
 * parsePromptsAt), so planStep need not sort the ids' hashes again: the ids' fnv1a hashes
 * then, and those of them that occur more than once. Kept by array, weakly.
 */
interface IdCheck {
  readonly hashes: Uint32Array;
  readonly collide: Set<number> | undefined;
}

const checks = new WeakMap<readonly Candidate[], IdCheck>();

/**
 * Records that `hashes` are the fnv1a hashes of `candidates`' ids and `collide` the hashes
 * among them that occur more than once (math/hash.ts collidingHashes). O(1).
 */
export function noteIdCheck(candidates: readonly Candidate[], hashes: Uint32Array, collide: Set<number> | undefined): void {
  checks.set(candidates, { hashes, collide });
}

/** Gives `to`, whose ids are `from`'s in the same order, `from`'s recorded checks (ids, and fields if checked). O(1). */
export function carryIdCheck(from: readonly Candidate[], to: readonly Candidate[]): void {
  const check = checks.get(from);
  if (check !== undefined) checks.set(to, check);
  if (fieldsChecked(from) && from.length === to.length) checkedFields.set(to, to.length);
}

/**
 * Candidate arrays whose every field a reader checked as it made them (a prompts file's
 * lines, a service request's candidates: io/formats.ts checkCandidate), so the library's entry
 * (io/formats.ts checkCandidates) does not check them again. Kept by array, weakly, with its
 * length then: an array a caller grew since (a candidate pushed) is checked again.
 */
const checkedFields = new WeakMap<readonly Candidate[], number>();

/** Records that a reader checked every field of `candidates` as it made the array. O(1). */
export function noteFieldsChecked(candidates: readonly Candidate[]): void {
  checkedFields.set(candidates, candidates.length);
}

/** Whether a reader recorded `candidates` as checked (noteFieldsChecked). O(1). */
export function fieldsChecked(candidates: readonly unknown[]): boolean {
  return checkedFields.get(candidates as readonly Candidate[]) === candidates.length;
}

/**
 * The first candidate whose id repeats an earlier one (math/hash.ts firstRepeat), `hashes`
 * being the ids' fnv1a hashes now. When a check was recorded for the array and its hashes are
 * these, element by element, the recorded collisions are used instead of sorting: two equal
 * ids now have equal hashes, which were equal then too, so their hash is among those recorded
 * (whatever was done to the array or its objects in between). Else the full search. O(N)
 * with a matching record, O(N log N) without.
 */
export function firstRepeatedId(candidates: readonly Candidate[], hashes: Uint32Array): { at: number; before: number } | undefined {
  const count = candidates.length;
  const keyOf = (i: number) => candidates[i]!.id;
  const check = checks.get(candidates);
  if (check !== undefined && check.hashes.length === count && sameHashes(check.hashes, hashes, count)) {
    return firstRepeat(count, keyOf, hashes, check.collide);
  }
  return firstRepeat(count, keyOf, hashes, collidingHashes(count, hashes));
}

function sameHashes(a: Uint32Array, b: Uint32Array, count: number): boolean {
  for (let i = 0; i < count; i++) if (a[i] !== b[i]) return false;
  return true;
}
