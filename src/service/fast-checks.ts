import { storedTextProblem } from '../fields.js';
import { MAX_JSON_DEPTH, parseJson } from '../io/jsonl.js';

/**
 * Quicker forms of two request checks, for the service's plan requests (both the event loop
 * and a planning thread read each one): each settles only what it is sure of, and hands
 * anything else to the careful check, so values and errors stay the careful ones
 * (test/service-fast-checks.test.ts compares the two over tricky inputs).
 */

/** True when `v` holds arrays or objects nested more than `limit` deep. O(size of v). */
function deeperThan(v: unknown, limit: number): boolean {
  if (v === null || typeof v !== 'object') return false;
  if (limit === 0) return true;
  if (Array.isArray(v)) {
    for (let k = 0; k < v.length; k++) if (deeperThan(v[k], limit - 1)) return true;
    return false;
  }
  const o = v as Record<string, unknown>;
  for (const key of Object.keys(o)) if (deeperThan(o[key], limit - 1)) return true;
  return false;
}

/**
 * parseJson(text, where) (io/jsonl.ts): JSON.parse first, the nesting limit then checked on
 * the value, not by a scan of the text (a 256-candidate body holds more than MAX_JSON_DEPTH
 * brackets, so the text's scan always ran: 35 of its 220 µs). JSON text nests exactly as
 * deep as its value. Text that does not parse, or nests too deep, goes to parseJson, which
 * throws its own error (the depth one first, as before).
 */
export function parseJsonFast(text: string, where: string): unknown {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return parseJson(text, where);
  }
  return deeperThan(value, MAX_JSON_DEPTH) ? parseJson(text, where) : value;
}

/**
 * The id of a candidate that checkCandidate (io/formats.ts) surely accepts, without the work
 * of naming its place: an object with a storable non-empty string `id`, `prompt_tokens` and
 * `max_tokens` absent or integers in range, `group` absent or a storable non-empty string, and
 * no `partial_rewards` or hint. Undefined for anything else: the caller checks it the careful way.
 */
export function plainCandidateId(item: unknown): string | undefined {
  if (item === null || typeof item !== 'object' || Array.isArray(item)) return undefined;
  const c = item as Record<string, unknown>;
  const id = c.id;
  if (typeof id !== 'string' || id.length === 0 || storedTextProblem(id) !== undefined) return undefined;
  if (!intOrAbsent(c.prompt_tokens, 0) || !intOrAbsent(c.max_tokens, 1)) return undefined;
  const group = c.group;
  if (group !== undefined && (typeof group !== 'string' || group.length === 0 || storedTextProblem(group) !== undefined)) return undefined;
  if (c.partial_rewards !== undefined || c.prior_pass_rate !== undefined || c.prior_samples !== undefined) return undefined;
  return id;
}

const intOrAbsent = (v: unknown, min: number) => v === undefined || (typeof v === 'number' && Number.isSafeInteger(v) && v >= min);
