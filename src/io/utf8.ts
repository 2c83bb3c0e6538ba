import { badInput } from '../errors.js';
import { binaryKind } from './file-kind.js';

/**
 * Strict UTF-8 for everything read from outside (files, stdin, request bodies, stdio lines):
 * bytes that are not UTF-8 are an error naming `name:line` and the byte, never a silent
 * U+FFFD that would turn two different ids into one. A leading byte-order mark is dropped.
 */
const strict = new TextDecoder('utf-8', { fatal: true });
/** The longest string V8 (Node 20 to 24, 64-bit) makes: 2^29 − 24 UTF-16 code units. */
export const MAX_STRING_LENGTH = 2 ** 29 - 24;
/** Why text past MAX_STRING_LENGTH is refused (decodeUtf8 here, and the chunked reader before it reads on: chunks.ts). */
export const TOO_LONG = `more than Node can hold as one string (${MAX_STRING_LENGTH} characters): no line of JSON this tool reads is that long`;
/** The same for text that does not start a file: a U+FEFF there is a character, kept. */
const strictKeepingBom = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/**
 * Decodes UTF-8 bytes, or throws BAD_INPUT naming `name:line`, the column and the bad byte
 * (`name` alone when `lines` is false: the bytes are one line already). `lineOffset` lines come
 * before the bytes (a piece of a file, io/chunks.ts), and `fileStart` says whether a leading
 * byte-order mark is the file's (dropped) or text. O(n).
 */
export function decodeUtf8(bytes: Uint8Array, name: string, lines = true, lineOffset = 0, fileStart = true): string {
  try {
    return (fileStart ? strict : strictKeepingBom).decode(bytes);
  } catch {
    const kind = fileStart && lineOffset === 0 ? binaryKind(bytes) : undefined;
    if (kind !== undefined) throw badInput(lines ? `${name}:1` : name, kind);
    const at = invalidUtf8At(bytes);
    // Well-formed, yet not decoded: more characters than a string holds (V8: 2^29 − 24, ~512 MiB).
    if (at < 0) throw badInput(lines && lineOffset > 0 ? `${name}:${lineOffset + 1}` : name, `${bytes.length} bytes of text in one piece, ${TOO_LONG}${lines ? '; split the file' : ''}`);
    let line = 1 + lineOffset;
    let lineStart = 0;
    for (let k = 0; k < at; k++) {
      if (bytes[k] === 0x0a) {
        line++;
        lineStart = k + 1;
      }
    }
    const hex = `0x${bytes[at]!.toString(16).padStart(2, '0').toUpperCase()}`;
    throw badInput(lines ? `${name}:${line}` : name, `not valid UTF-8 text: byte ${at - lineStart + 1} of the line (${hex}) starts no well-formed character; save it as UTF-8`);
  }
}

/**
 * Offset of the first byte that does not start a well-formed UTF-8 sequence (Unicode 15,
 * table 3-7: no overlong forms, no surrogates, nothing above U+10FFFF, no cut-off sequence),
 * or -1 when all of it is well-formed. O(n).
 */
export function invalidUtf8At(bytes: Uint8Array): number {
  const n = bytes.length;
  let i = 0;
  while (i < n) {
    const b = bytes[i]!;
    if (b < 0x80) {
      i++;
      continue;
    }
    // [lowest, highest] allowed for the second byte, and how many continuation bytes follow
    let lo = 0x80;
    let hi = 0xbf;
    let more: number;
    if (b >= 0xc2 && b <= 0xdf) more = 1;
    else if (b >= 0xe0 && b <= 0xef) {
      more = 2;
      if (b === 0xe0) lo = 0xa0;
      if (b === 0xed) hi = 0x9f;
    } else if (b >= 0xf0 && b <= 0xf4) {
      more = 3;
      if (b === 0xf0) lo = 0x90;
      if (b === 0xf4) hi = 0x8f;
    } else return i;
    for (let k = 1; k <= more; k++) {
      if (i + k >= n) return i;
      const c = bytes[i + k]!;
      if (k === 1 ? c < lo || c > hi : c < 0x80 || c > 0xbf) return i;
    }
    i += more + 1;
  }
  return -1;
}

