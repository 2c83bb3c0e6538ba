/**
 * A scanner for the common shape of a JSONL line: one flat object whose keys are plain ASCII
 * and whose values are plain ASCII strings, numbers, `true`, `false` or `null`
 * (`{"id":"prompt-0","prompt_tokens":50,"max_tokens":3072}`). It reads the line's UTF-8 bytes
 * and gives the fields JSON.parse would give, or says it is not sure: a non-ASCII byte, an
 * escape, a control character, a nested value, a repeated key, `__proto__`, anything
 * malformed. The caller then takes the careful path (JSON.parse), which gives the same value
 * or the same error, so the scanner never decides what is valid, only what is plain.
 *
 * Strings are fresh copies, as JSON.parse makes them: short ones sliced from the text (V8
 * copies a substring under 13 characters), longer ones decoded from the bytes (Latin-1 = ASCII
 * here), since a longer substring would keep the whole text alive as long as the value lives.
 */

import { jsonlLine } from './jsonl.js';

/**
 * eachJsonl (io/jsonl.ts) with a fast path: each line the scanner reads goes to `fast`, which
 * handles it and returns true, or returns false having done nothing; every other line (and
 * those) takes eachJsonl's path to `each`. `bytes` must be `text` in UTF-8 (no byte-order
 * mark). Lines, their numbers, values and errors are eachJsonl's. Returns the number of the
 * last line, the empty one after a final newline included. O(size of text).
 */
export function eachFlatJsonl(
  text: string, bytes: Buffer, name: string,
  fast: (fields: FlatFields, line: number) => boolean, each: (value: Record<string, unknown>, line: number) => void, firstLine = 1,
): number {
  const fields = new FlatFields();
  let line = firstLine - 1;
  let t = 0; // where the line starts in text
  let b = 0; // and in bytes
  while (t <= text.length) {
    line++;
    const next = b < bytes.length ? fields.scan(bytes, b, text, t) : -1;
    if (next >= 0 && fast(fields, line)) {
      // A scanned line is ASCII: as many characters as bytes.
      t += next - b;
      b = next;
      continue;
    }
    let end = text.indexOf('\n', t);
    if (end < 0) end = text.length;
    jsonlLine(text, t, end, name, line, each);
    t = end + 1;
    const byteEnd = bytes.indexOf(0x0a, b);
    b = byteEnd < 0 ? bytes.length : byteEnd + 1;
  }
  return line;
}

/** Characters of text encoded at a time by eachFlatJsonlText. */
const PIECE_CHARS = 1 << 16;

/**
 * eachFlatJsonl over a text alone: its lines encoded to UTF-8 a piece of about PIECE_CHARS
 * characters at a time (a piece ends after a newline), so only one piece's bytes are held.
 * O(size of text).
 */
export function eachFlatJsonlText(
  text: string, name: string, fast: (fields: FlatFields, line: number) => boolean, each: (value: Record<string, unknown>, line: number) => void,
): void {
  const room = Buffer.allocUnsafe(3 * PIECE_CHARS); // UTF-8 takes at most 3 bytes a UTF-16 unit
  let line = 1;
  for (let start = 0; ; ) {
    let end = start + PIECE_CHARS >= text.length ? text.length : text.lastIndexOf('\n', start + PIECE_CHARS) + 1;
    if (end <= start) {
      // one line longer than a piece
      end = text.indexOf('\n', start + PIECE_CHARS);
      end = end < 0 ? text.length : end + 1;
    }
    const piece = text.slice(start, end);
    const bytes = end - start <= PIECE_CHARS ? room : Buffer.allocUnsafe(3 * (end - start));
    line = eachFlatJsonl(piece, bytes.subarray(0, bytes.write(piece)), name, fast, each, line);
    if (end === text.length) return;
    start = end;
  }
}

/** What a field's value is. */
export const STRING = 1;
export const NUMBER = 2;
export const TRUE = 3;
export const FALSE = 4;
export const NULL = 5;

/** More fields than this on a line: not a line for the scanner. */
const MAX_FIELDS = 32;
/** More distinct keys than this in a file: the rest take the careful path. */
const MAX_KEYS = 64;

/** The fields of the line scanned last; reused from line to line. */
export class FlatFields {
  count = 0;
  /** Each field's key (one string per distinct key, shared by all lines). */
  readonly keys: string[] = new Array<string>(MAX_FIELDS).fill('');
  readonly kinds = new Uint8Array(MAX_FIELDS);
  readonly numbers = new Float64Array(MAX_FIELDS);
  readonly strings: string[] = new Array<string>(MAX_FIELDS).fill('');
  /** The keys met so far. */
  private readonly known: string[] = [];
  /** The text of the line scanned, and its offset in `text` minus the one in the bytes. */
  private text = '';
  private shift = 0;

  /**
   * Scans the line starting at `start` (JSON whitespace, one flat object, JSON whitespace, a
   * newline or the end of `bytes`). Returns the offset just past the line's newline (one past
   * the end of `bytes` for a last line without one), or -1 when not sure (the fields are then
   * meaningless). `text` is the same line's text from `textStart` (bytes decoded), for
   * short strings. O(length of the line).
   */
  scan(bytes: Buffer, start: number, text: string, textStart: number): number {
    this.text = text;
    this.shift = textStart - start;
    const n = bytes.length;
    let i = skipSpace(bytes, start);
    if (i >= n || bytes[i] !== 0x7b) return -1; // {
    i = skipSpace(bytes, i + 1);
    let count = 0;
    if (i < n && bytes[i] === 0x7d) i++; // {}
    else {
      for (;;) {
        if (count === MAX_FIELDS || i >= n || bytes[i] !== 0x22) return -1;
        const keyEnd = plainStringEnd(bytes, i + 1);
        if (keyEnd < 0) return -1;
        const key = this.keyOf(bytes, i + 1, keyEnd, count);
        if (key === undefined) return -1;
        for (let k = 0; k < count; k++) if (this.keys[k] === key) return -1; // JSON.parse keeps the last
        this.keys[count] = key;
        i = skipSpace(bytes, keyEnd + 1);
        if (i >= n || bytes[i] !== 0x3a) return -1; // :
        i = skipSpace(bytes, i + 1);
        if (i >= n) return -1;
        i = this.value(bytes, i, count);
        if (i < 0) return -1;
        count++;
        i = skipSpace(bytes, i);
        if (i >= n) return -1;
        if (bytes[i] === 0x7d) {
          i++;
          break;
        }
        if (bytes[i] !== 0x2c) return -1; // ,
        i = skipSpace(bytes, i + 1);
      }
    }
    this.count = count;
    i = skipSpace(bytes, i);
    if (i === n) return n + 1;
    return bytes[i] === 0x0a ? i + 1 : -1;
  }

  /** Reads the value at `i` into field `k`; returns the offset after it, or -1. */
  private value(bytes: Buffer, i: number, k: number): number {
    const c = bytes[i]!;
    if (c === 0x22) {
      const end = plainStringEnd(bytes, i + 1);
      if (end < 0) return -1;
      this.kinds[k] = STRING;
      // A short substring is a copy (V8 slices only from 13 characters on), and copying one
      // in JavaScript costs a third of a native call: so the text, else the bytes.
      this.strings[k] = end - i - 1 < 13 ? this.text.slice(i + 1 + this.shift, end + this.shift) : latin1(bytes, i + 1, end);
      return end + 1;
    }
    if (c === 0x2d || (c >= 0x30 && c <= 0x39)) return this.number(bytes, i, k);
    if (word(bytes, i, 'true')) return ((this.kinds[k] = TRUE), i + 4);
    if (word(bytes, i, 'false')) return ((this.kinds[k] = FALSE), i + 5);
    if (word(bytes, i, 'null')) return ((this.kinds[k] = NULL), i + 4);
    return -1;
  }

  /**
   * A JSON number: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?. Up to 15 integer digits are
   * summed exactly; any other form goes through Number(), which rounds a decimal text to the
   * nearest double as JSON.parse does (both ECMAScript's StringToNumber).
   */
  private number(bytes: Buffer, start: number, k: number): number {
    const n = bytes.length;
    let i = start;
    const negative = bytes[i] === 0x2d;
    if (negative) i++;
    if (i >= n) return -1;
    let value = 0;
    if (bytes[i] === 0x30) i++;
    else if (bytes[i]! >= 0x31 && bytes[i]! <= 0x39) {
      for (; i < n && bytes[i]! >= 0x30 && bytes[i]! <= 0x39; i++) value = value * 10 + (bytes[i]! - 0x30);
    } else return -1;
    let plain = i - start - (negative ? 1 : 0) <= 15;
    if (i < n && bytes[i] === 0x2e) {
      plain = false;
      const from = ++i;
      while (i < n && bytes[i]! >= 0x30 && bytes[i]! <= 0x39) i++;
      if (i === from) return -1;
    }
    if (i < n && (bytes[i] === 0x65 || bytes[i] === 0x45)) {
      plain = false;
      i++;
      if (i < n && (bytes[i] === 0x2b || bytes[i] === 0x2d)) i++;
      const from = i;
      while (i < n && bytes[i]! >= 0x30 && bytes[i]! <= 0x39) i++;
      if (i === from) return -1;
    }
    this.kinds[k] = NUMBER;
    this.numbers[k] = plain ? (negative ? -value : value) : Number(this.text.slice(start + this.shift, i + this.shift));
    return i;
  }

  /** The key in bytes [start, end) as one shared string, or undefined (`__proto__`, too many keys). */
  private keyOf(bytes: Buffer, start: number, end: number, at: number): string | undefined {
    const guess = this.keys[at]!; // the key at this place on the line before
    if (guess !== '' && same(bytes, start, end, guess)) return guess;
    for (const key of this.known) if (same(bytes, start, end, key)) return key;
    if (this.known.length === MAX_KEYS) return undefined;
    // Interned, as a property name is: comparing it with a literal then compares pointers.
    const key = Object.keys({ [latin1(bytes, start, end)]: 0 })[0]!;
    if (key === '__proto__') return undefined;
    this.known.push(key);
    return key;
  }
}

/**
 * A number stored as compactly as JSON.parse stores it: an integer that fits 32 bits as an
 * int (V8 keeps it unboxed in an object, where a double read from a Float64Array may be
 * boxed: 16 bytes more a field), -0 kept.
 */
export function compact(v: number): number {
  return v === (v | 0) && (v !== 0 || 1 / v > 0) ? v | 0 : v;
}

/** A field's value as JSON.parse gives it (numbers `compact`). */
export function valueOf(f: FlatFields, k: number): unknown {
  switch (f.kinds[k]) {
    case STRING:
      return f.strings[k];
    case NUMBER:
      return compact(f.numbers[k]!);
    case TRUE:
      return true;
    case FALSE:
      return false;
    default:
      return null;
  }
}

/** Offset after JSON whitespace (space, tab, carriage return) from `i`. */
function skipSpace(bytes: Buffer, i: number): number {
  for (; i < bytes.length; i++) {
    const c = bytes[i];
    if (c !== 0x20 && c !== 0x09 && c !== 0x0d) break;
  }
  return i;
}

/** Offset of the closing quote of a string starting at `i` with only printable ASCII and no `\`, or -1. */
function plainStringEnd(bytes: Buffer, i: number): number {
  for (; i < bytes.length; i++) {
    const c = bytes[i]!;
    if (c === 0x22) return i;
    if (c < 0x20 || c === 0x5c || c >= 0x7f) return -1;
  }
  return -1;
}

function same(bytes: Buffer, start: number, end: number, key: string): boolean {
  if (end - start !== key.length) return false;
  for (let j = 0; j < key.length; j++) if (bytes[start + j] !== key.charCodeAt(j)) return false;
  return true;
}

function word(bytes: Buffer, i: number, w: string): boolean {
  return same(bytes, i, Math.min(i + w.length, bytes.length), w);
}

/** The bytes [start, end) (ASCII) as a new string. */
function latin1(bytes: Buffer, start: number, end: number): string {
  return (bytes as unknown as { latin1Slice(s: number, e: number): string }).latin1Slice(start, end);
}
