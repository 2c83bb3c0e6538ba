import { readFileSync } from 'node:fs';
import { RolloutBudgetError, badInput, cannotRead, quote } from '../errors.js';
import { MAX_STORED_TEXT } from '../fields.js';
import { refuseDevice } from './chunks.js';
import { decodeUtf8 } from './utf8.js';
import { binaryKind } from './file-kind.js';
import { statIfThere } from './paths.js';

/** One parsed JSONL line with where it came from. */
export interface Located<T> {
  readonly where: string;
  readonly line: number;
  readonly value: T;
}

/**
 * Reads a file as UTF-8 text, or throws IO_ERROR naming the path and the reason; bytes that
 * are not UTF-8 are BAD_INPUT naming `path:line`.
 */
export function readText(path: string): string {
  let bytes: Buffer;
  try {
    const stat = statIfThere(path);
    if (stat !== undefined) refuseDevice(path, stat);
    bytes = readFileSync(path);
  } catch (error) {
    if (error instanceof RolloutBudgetError) throw error;
    throw cannotRead(path, error);
  }
  return decodeUtf8(bytes, path);
}

/**
 * How deep arrays and objects may nest in any JSON we read (files, request bodies, stdio
 * lines). Our formats need 4 levels and a candidate's own fields a few more; deeper values
 * would overflow the stack of every recursive reader and writer (JSON.stringify at ~5,000).
 */
export const MAX_JSON_DEPTH = 128;

/** True when JSON text nests arrays/objects deeper than `limit` (strings skipped). O(length). */
export function nestedDeeperThan(text: string, limit: number): boolean {
  let depth = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22) {
      // a string: skip to its closing quote, past escapes
      for (i++; i < text.length; i++) {
        const d = text.charCodeAt(i);
        if (d === 0x5c) i++;
        else if (d === 0x22) break;
      }
    } else if (c === 0x5b || c === 0x7b) {
      if (++depth > limit) return true;
    } else if (c === 0x5d || c === 0x7d) depth--;
  }
  return false;
}

/**
 * False when `text` cannot nest deeper than `limit`: it holds at most `limit` of `[` and `{`
 * in all (strings included). Native substring searches, so a typical line costs a few
 * nanoseconds; only a text with more brackets needs nestedDeeperThan's scan.
 */
function fewBrackets(text: string, limit: number): boolean {
  let count = 0;
  for (let at = text.indexOf('{'); at >= 0; at = text.indexOf('{', at + 1)) if (++count > limit) return false;
  for (let at = text.indexOf('['); at >= 0; at = text.indexOf('[', at + 1)) if (++count > limit) return false;
  return true;
}

/**
 * JSON.parse with the nesting limit; a malformed or too deep text is BAD_INPUT at `where`
 * (a function, so callers build the place only on error), quoting the start of the text.
 */
export function parseJson(text: string, where: string | (() => string)): unknown {
  if (!fewBrackets(text, MAX_JSON_DEPTH) && nestedDeeperThan(text, MAX_JSON_DEPTH)) {
    throw badInput(placeOf(where), `JSON nested deeper than ${MAX_JSON_DEPTH} levels of arrays and objects: ${quote(text)}`);
  }
  try {
    return JSON.parse(text);
  } catch (error) {
    // A binary file whose first bytes pass as text (Parquet's PAR1, a SQLite state's header).
    const kind = binaryKind(text.slice(0, 16));
    if (kind !== undefined) throw badInput(placeOf(where), kind);
    throw badInput(placeOf(where), `malformed JSON (${(error as Error).message}): ${quote(text)}`);
  }
}

const placeOf = (where: string | (() => string)) => (typeof where === 'string' ? where : where());

/**
 * The longest rollout id: room for a prompt id of MAX_STORED_TEXT characters within the
 * `<step>/<prompt id>#<j>` the executor and the Python package make (a step of at most 10
 * digits, an index of at most 16): a prompt id the plan took made rollout ids observe refused.
 */
export const MAX_ROLLOUT_ID = MAX_STORED_TEXT + 64;

/**
 * Calls `each(value, line)` for every JSONL line in order (numbered from `firstLine`), skipping
 * blank lines. A line that is not a JSON object is an error naming `name:line`. Makes no
 * object per line beyond the parsed value: the place is a string only in an error.
 * O(size of text).
 */
export function eachJsonl(text: string, name: string, each: (value: Record<string, unknown>, line: number) => void, firstLine = 1): void {
  let line = firstLine - 1;
  let start = 0;
  while (start <= text.length) {
    let end = text.indexOf('\n', start);
    if (end < 0) end = text.length;
    jsonlLine(text, start, end, name, ++line, each);
    start = end + 1;
  }
}

/**
 * The line `text[start, end)` of a JSONL text, numbered `line`: nothing when blank, else its
 * value, which must be a JSON object, to `each`. O(length of the line).
 */
export function jsonlLine(text: string, start: number, end: number, name: string, line: number, each: (value: Record<string, unknown>, line: number) => void): void {
  const raw = text.slice(start, end).trim();
  if (raw === '') return;
  const where = () => `${name}:${line}`;
  let value: unknown;
  try {
    value = parseJson(raw, where);
  } catch (error) {
    // A JSON document over several lines (a plan file, a pretty-printed body) where JSONL goes.
    if (raw === '{' || raw === '[') throw badInput(where(), `malformed JSON: the line is only ${quote(raw)}; JSONL holds a whole JSON object on each line, and this looks like one JSON document over several lines`);
    throw error;
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw badInput(where(), `each line must be a JSON object, got ${quote(value)}`);
  }
  each(value as Record<string, unknown>, line);
}

/**
 * Parses JSONL text into objects, skipping blank lines. A line that is not a JSON object is
 * an error naming `name:line`. O(size of text).
 */
export function parseJsonl(text: string, name: string): Located<Record<string, unknown>>[] {
  const out: Located<Record<string, unknown>>[] = [];
  eachJsonl(text, name, (value, line) => out.push({ where: `${name}:${line}`, line, value }));
  return out;
}

