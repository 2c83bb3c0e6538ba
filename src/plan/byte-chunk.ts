import { chunkText } from '../text-chunk.js';

/** Below this many bytes a copy goes byte by byte (ByteChunk.move). */
const SHORT_COPY = 16;

/**
 * Plan text built as UTF-8 bytes, for writing a plan file without a string per row. One
 * Uint8Array holds the chunk being written, `bytes[0, length)`, and after it an arena of
 * ASCII texts kept for copying (the writer's constants, pinned, and the numbers formatted by
 * plan/text-cache.ts), so a kept text is copied inside one array (copyWithin, or byte by byte
 * when short), with no object made per copy (a copy between two arrays costs 2-3 times more).
 * Texts are written byte by byte when plain ASCII; anything else (an id to escape, non-ASCII
 * text) goes through the string JSON.stringify gives, so the bytes are always the text's.
 */
export class ByteChunk {
  /** The chunk, [0, length), then the arena, from `room`. */
  private bytes: Uint8Array;
  /** Bytes of the chunk written so far. */
  length = 0;
  /** Where the arena starts (the chunk's capacity). */
  private room: number;
  /** The arena's end of pinned texts, and of all texts (offsets from `room`). */
  private pinned = 0;
  private used = 0;
  /** Counts the times the unpinned texts were dropped (text-cache.ts clears its slots then). */
  generation = 0;

  /**
   * `room`: the chunk's first capacity (grown for a longer row); the arena starts at `arena`
   * bytes and doubles up to `maxArena`, then drops its unpinned texts to take more.
   */
  constructor(room: number, arena: number, private readonly maxArena: number) {
    this.room = room;
    this.bytes = new Uint8Array(room + arena);
  }

  /** Makes room for `k` more bytes in the chunk. */
  private ensure(k: number): void {
    if (this.length + k <= this.room) return;
    const room = Math.max(2 * this.room, this.length + k);
    const bytes = new Uint8Array(room + this.bytes.length - this.room);
    bytes.set(this.bytes.subarray(0, this.length));
    bytes.set(this.bytes.subarray(this.room, this.room + this.used), room);
    this.bytes = bytes;
    this.room = room;
  }

  /**
   * Keeps an ASCII text in the arena; returns its offset there (for copy()), valid until
   * `generation` changes. A pinned text stays for the chunk's life.
   */
  keep(text: string, pin = false): number {
    const n = text.length;
    this.reserve(n);
    const at = this.used;
    const b = this.bytes;
    for (let i = 0, p = this.room + at; i < n; i++) b[p + i] = text.charCodeAt(i);
    this.used = at + n;
    if (pin) this.pinned = this.used;
    return at;
  }

  /**
   * Keeps the chunk's own last bytes, [from, length), in the arena as keep() keeps a text (they
   * must be ASCII: texts written by copy(), num() and quoted() of plain ids); returns their offset.
   */
  keepWritten(from: number): number {
    const n = this.length - from;
    this.reserve(n);
    const at = this.used;
    this.bytes.copyWithin(this.room + at, from, this.length);
    this.used = at + n;
    return at;
  }

  /**
   * Makes room for `n` more bytes in the arena: doubles it up to `maxArena` (the chunk's bytes
   * are kept), then drops its unpinned texts instead (`generation` counts the drops).
   */
  private reserve(n: number): void {
    let arena = this.bytes.length - this.room;
    if (this.used + n <= arena) return;
    if (arena < this.maxArena || this.pinned + n > arena) {
      while (this.used + n > arena) arena *= 2;
      const bytes = new Uint8Array(this.room + arena);
      bytes.set(this.bytes.subarray(0, this.room + this.used));
      this.bytes = bytes;
    } else {
      this.used = this.pinned;
      this.generation++;
    }
  }

  /** Appends the kept text at arena offset `at`, `n` bytes long. */
  copy(at: number, n: number): void {
    this.ensure(n);
    this.move(this.room + at, n);
  }

  /** Appends again the chunk's own bytes [from, from + n), written since it began. */
  again(from: number, n: number): void {
    this.ensure(n);
    this.move(from, n);
  }

  /**
   * Appends bytes [from, from + n) of the array (room made): byte by byte when short, where
   * copyWithin's call costs more than the bytes (2 bytes: 7 against 33 ns here; 20: 28
   * against 24 ns).
   */
  private move(from: number, n: number): void {
    const b = this.bytes;
    const to = this.length;
    if (n < SHORT_COPY) for (let j = 0; j < n; j++) b[to + j] = b[from + j]!;
    else b.copyWithin(to, from, from + n);
    this.length = to + n;
  }

  /** Appends a text as UTF-8. */
  text(s: string): void {
    const n = s.length;
    this.ensure(3 * n);
    const b = this.bytes;
    let p = this.length;
    for (let i = 0; i < n; i++) {
      const c = s.charCodeAt(i);
      if (c >= 0x80) {
        this.length = p;
        this.length += Buffer.from(b.buffer, b.byteOffset, b.length).write(s.slice(i), p, 'utf8');
        return;
      }
      b[p++] = c;
    }
    this.length = p;
  }

  /** JSON.stringify(s), without its opening quote when `skip` is 1. */
  quoted(s: string, skip: 0 | 1 = 0): void {
    const n = s.length;
    this.ensure(n + 2);
    const b = this.bytes;
    const start = this.length;
    let p = start;
    if (skip === 0) b[p++] = 0x22;
    for (let i = 0; i < n; i++) {
      const c = s.charCodeAt(i);
      if (c < 0x20 || c === 0x22 || c === 0x5c || c >= 0x7f) {
        // Escapes, non-ASCII text, lone surrogates: JSON.stringify's own text.
        this.length = start;
        this.text(skip === 0 ? JSON.stringify(s) : JSON.stringify(s).slice(1));
        return;
      }
      b[p++] = c;
    }
    b[p++] = 0x22;
    this.length = p;
  }

  /** A number as JSON.stringify writes it (non-finite: null); a non-negative int32 digit by digit. */
  num(x: number): void {
    if ((x | 0) !== x || x < 0) {
      this.text(Number.isFinite(x) ? String(x) : 'null');
      return;
    }
    // -0 | 0 is 0, and String(-0) is "0" too.
    this.ensure(10);
    const b = this.bytes;
    let digits = 1;
    for (let t = x; t >= 10; t = (t / 10) | 0) digits++;
    const p = this.length;
    let v = x;
    for (let k = p + digits - 1; k >= p; k--) {
      const q = (v / 10) | 0;
      b[k] = 0x30 + v - 10 * q;
      v = q;
    }
    this.length = p + digits;
  }

  /** The chunk's bytes, valid until the next write; starts a new chunk. */
  take(): Uint8Array {
    const out = this.bytes.subarray(0, this.length);
    this.length = 0;
    return out;
  }
}

/** A chunk of plan text: a string, or UTF-8 bytes valid until the next chunk is asked for. */
export type PlanChunk = string | Uint8Array;

/** A chunk's text (src/text-chunk.ts, where the CLI's output code reaches it without loading plan/). */
export { chunkText };

/** The text of chunks whose bytes last only until the next one is asked for. O(size). */
export function joinChunks(chunks: Iterable<PlanChunk>): string {
  let text = '';
  for (const chunk of chunks) text += chunkText(chunk);
  return text;
}
