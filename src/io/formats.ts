import { badInput, quote } from '../errors.js';
import type { Candidate } from '../plan/types.js';
import { collidingHashes, fnv1a, firstRepeat } from '../math/hash.js';
import { noteFieldsChecked, noteIdCheck } from '../plan/checked-ids.js';
import { CHUNK_BYTES, lineChunks } from './chunks.js';
import { eachFlatJsonl, eachFlatJsonlText, NUMBER, STRING, valueOf, type FlatFields } from './flat-scan.js';
import { MAX_STORED_TEXT } from '../fields.js';
import { MAX_TOKEN_COUNT } from '../posterior/length.js';

// The candidate checks live below plan/ and io/ both (plan/candidates.ts): planStep runs them too.
import { checkCandidate } from '../plan/candidates.js';
export { checkCandidate, checkCandidates } from '../plan/candidates.js';

/** Parses and validates a prompts JSONL file. Unknown fields are kept. */
export function parsePrompts(text: string, name: string): Candidate[] {
  return parsePromptsAt(text, name).candidates;
}

/**
 * parsePrompts, with each prompt's place (`file:line`) by id, for messages about one prompt
 * later; `lines` is built on first read (a plan that names no prompt never pays for it).
 * Repeated ids are found by their hashes (math/hash.ts firstRepeat), so a large file makes
 * no map of its ids; the error is the one a line-by-line check would give first. The check is
 * recorded for the candidates (plan/checked-ids.ts), so planStep does not sort them again.
 * O(size of text + N log N).
 */
export function parsePromptsAt(text: string, name: string): ParsedPrompts {
  return promptsOf(name, (fast, each) => eachFlatJsonlText(text, name, fast, each));
}

/** Prompts read from a file: the candidates, and each one's place (`file:line`) by id, built on first read. */
export interface ParsedPrompts {
  readonly candidates: Candidate[];
  readonly lines: Map<string, string>;
}

/**
 * parsePromptsAt for the file at `path`, read a piece of whole lines at a time (io/chunks.ts
 * lineChunks): its text is never held whole, so none of it lives on while the prompts are
 * planned. Values and errors are parsePromptsAt's on the file's text: bytes that are not
 * UTF-8 anywhere in the file are the error, before any line's (the rest of the file is
 * checked when a line is refused). `chunkBytes`: a piece's size. O(size of the file + N log N).
 */
export function parsePromptsFile(path: string, name = path, chunkBytes = CHUNK_BYTES): ParsedPrompts {
  const pieces = lineChunks(path, name, chunkBytes);
  let unread: unknown; // the file's own error (bad bytes, a failed read): first, whatever the lines before
  const next = () => {
    try {
      return pieces.next();
    } catch (error) {
      unread = error;
      throw error;
    }
  };
  try {
    return promptsOf(name, (fast, each) => {
      for (let r = next(); !r.done; r = next()) eachFlatJsonl(r.value.text, r.value.bytes, name, fast, each, r.value.firstLine);
    });
  } catch (error) {
    if (unread !== undefined) throw unread;
    // Decodes the rest of the file: throws for its first bad byte, else does nothing.
    for (let r = pieces.next(); !r.done; r = pieces.next());
    throw error;
  }
}

/** The prompts of the lines `scan` gives (to `fast` when the scanner read them, else to `each`). */
function promptsOf(name: string, scan: (fast: (fields: FlatFields, line: number) => boolean, each: (value: Record<string, unknown>, line: number) => void) => void): ParsedPrompts {
  const out: Candidate[] = [];
  let lineOf = new Int32Array(1024);
  let hashes = new Uint32Array(1024);
  let collide: Set<number> | undefined;
  const repeated = (count: number) => {
    collide = collidingHashes(count, hashes);
    const r = firstRepeat(count, (i) => out[i]!.id, hashes, collide);
    return r === undefined ? undefined : badInput(`${name}:${lineOf[r.at]}`, `"id" ${quote(out[r.at]!.id)} repeats line ${lineOf[r.before]}`);
  };
  const add = (candidate: Candidate, line: number) => {
    const k = out.length;
    if (k === lineOf.length) {
      lineOf = grown(lineOf, new Int32Array(2 * k));
      hashes = grown(hashes, new Uint32Array(2 * k));
    }
    lineOf[k] = line;
    hashes[k] = fnv1a(candidate.id);
    out.push(candidate);
  };
  try {
    scan(
      (fields, line) => {
        const candidate = plainCandidate(fields);
        if (candidate !== undefined) add(candidate, line);
        return candidate !== undefined;
      },
      (value, line) => {
        checkCandidate(`${name}:${line}`, value);
        add(value as Candidate, line);
      },
    );
  } catch (error) {
    // A repeat on an earlier line than the bad one is the first mistake in the file.
    throw repeated(out.length) ?? error;
  }
  const repeat = repeated(out.length);
  if (repeat !== undefined) throw repeat;
  noteIdCheck(out, hashes.subarray(0, out.length), collide);
  noteFieldsChecked(out);
  let lines: Map<string, string> | undefined;
  return {
    candidates: out,
    get lines() {
      return (lines ??= new Map(out.map((c, i) => [c.id, `${name}:${lineOf[i]}`])));
    },
  };
}

/**
 * The candidate of a scanned line (io/flat-scan.ts) when checkCandidate would surely accept
 * it: a non-empty `id` (plain ASCII, so storable), `prompt_tokens` and `max_tokens` safe
 * integers ≥ 0 and ≥ 1, a non-empty `group`, other fields kept as they are. Undefined (the
 * careful path decides) for anything else, `partial_rewards` and the hint fields included.
 * The object has the fields JSON.parse gives, in the line's order.
 */
function plainCandidate(f: FlatFields): Candidate | undefined {
  let id = false;
  for (let k = 0; k < f.count; k++) {
    const key = f.keys[k]!;
    const kind = f.kinds[k];
    const number = f.numbers[k]!;
    if (key === 'id' || key === 'group') {
      if (kind !== STRING || f.strings[k] === '' || f.strings[k]!.length > MAX_STORED_TEXT) return undefined;
      if (key === 'id') id = true;
    } else if (key === 'prompt_tokens' || key === 'max_tokens') {
      if (kind !== NUMBER || !Number.isSafeInteger(number) || number < (key === 'max_tokens' ? 1 : 0) || number > MAX_TOKEN_COUNT) return undefined;
    } else if (key === 'partial_rewards' || key === 'prior_pass_rate' || key === 'prior_samples') return undefined;
  }
  if (!id) return undefined;
  const usual = literal(f);
  if (usual !== undefined) return usual;
  const candidate: Record<string, unknown> = {};
  for (let k = 0; k < f.count; k++) candidate[f.keys[k]!] = valueOf(f, k);
  return candidate as Candidate;
}

/**
 * The usual lines' candidates as object literals: an object built key by key from `{}` took
 * more memory all through a plan (10⁶ prompts `{"id","prompt_tokens","max_tokens"}`: peak
 * 584 MB, as literals 456–490 MB, JSON.parse's objects 457–569 MB). Undefined for other lines.
 */
function literal(f: FlatFields): Candidate | undefined {
  const keys = f.keys;
  if (keys[0] !== 'id' || f.count > 3) return undefined;
  const id = f.strings[0]!;
  if (f.count === 1) return { id };
  if (f.count === 2 && keys[1] === 'max_tokens') return { id, max_tokens: valueOf(f, 1) as number };
  if (f.count === 3 && keys[1] === 'prompt_tokens' && keys[2] === 'max_tokens') return { id, prompt_tokens: valueOf(f, 1) as number, max_tokens: valueOf(f, 2) as number };
  return undefined;
}

function grown<T extends Int32Array | Uint32Array>(from: T, to: T): T {
  to.set(from);
  return to;
}

// The results format lives in io/results.ts; its names stay importable from here.
export { batchOf, checkedBatch, digestOf, parseResults, type ResultBatch, type RolloutResult } from './results.js';
