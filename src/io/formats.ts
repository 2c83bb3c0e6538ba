import { badInput, quote } from '../errors.js';
import type { Candidate } from '../plan/types.js';
import { fnv1a, firstRepeat } from '../math/hash.js';
import { eachJsonl, field } from './jsonl.js';

/**
 * Checks one candidate's fields (a prompts line, a service request's candidate) and returns
 * its id; throws BAD_INPUT naming `where`, the field and the value. Unknown fields are kept.
 */
export function checkCandidate(where: string, value: Record<string, unknown>): string {
  const id = field.string(where, value, 'id', true)!;
  field.int(where, value, 'prompt_tokens', 0);
  field.int(where, value, 'max_tokens', 1);
  field.string(where, value, 'group', false);
  field.rewards(where, value, 'partial_rewards');
  field.hint(where, value);
  return id;
}

/** Parses and validates a prompts JSONL file. Unknown fields are kept. */
export function parsePrompts(text: string, name: string): Candidate[] {
  return parsePromptsAt(text, name).candidates;
}

/**
 * parsePrompts, with each prompt's place (`file:line`) by id, for messages about one prompt
 * later; `lines` is built on first read (a plan that names no prompt never pays for it).
 * Repeated ids are found by their hashes (math/hash.ts firstRepeat), so a large file makes
 * no map of its ids; the error is the one a line-by-line check would give first.
 * O(size of text + N log N).
 */
export function parsePromptsAt(text: string, name: string): { candidates: Candidate[]; lines: Map<string, string> } {
  const out: Candidate[] = [];
  let lineOf = new Int32Array(1024);
  let hashes = new Uint32Array(1024);
  const repeated = (count: number) => {
    const r = firstRepeat(count, (i) => out[i]!.id, hashes);
    return r === undefined ? undefined : badInput(`${name}:${lineOf[r.at]}`, `"id" ${quote(out[r.at]!.id)} repeats line ${lineOf[r.before]}`);
  };
  try {
    eachJsonl(text, name, (value, line) => {
      const id = checkCandidate(`${name}:${line}`, value);
      const k = out.length;
      if (k === lineOf.length) {
        lineOf = grown(lineOf, new Int32Array(2 * k));
        hashes = grown(hashes, new Uint32Array(2 * k));
      }
      lineOf[k] = line;
      hashes[k] = fnv1a(id);
      out.push(value as Candidate);
    });
  } catch (error) {
    // A repeat on an earlier line than the bad one is the first mistake in the file.
    throw repeated(out.length) ?? error;
  }
  const repeat = repeated(out.length);
  if (repeat !== undefined) throw repeat;
  let lines: Map<string, string> | undefined;
  return {
    candidates: out,
    get lines() {
      return (lines ??= new Map(out.map((c, i) => [c.id, `${name}:${lineOf[i]}`])));
    },
  };
}

function grown<T extends Int32Array | Uint32Array>(from: T, to: T): T {
  to.set(from);
  return to;
}

// The results format lives in io/results.ts; its names stay importable from here.
export { batchOf, digestOf, parseResults, type ResultBatch, type RolloutResult } from './results.js';
