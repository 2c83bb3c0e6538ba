import type * as Crypto from 'node:crypto';
import { closeSync, fstatSync, openSync, readSync } from 'node:fs';
import { badInput, cannotRead, RolloutBudgetError } from '../errors.js';
import { lazyRequire } from '../lazy.js';
import { decodeUtf8, MAX_STRING_LENGTH, TOO_LONG } from './utf8.js';

/** node:crypto, loaded by the first digest (observe), not by a reader of prompts. */
const crypto = lazyRequire<typeof Crypto>('node:crypto');

/** A new sha256 hash (node:crypto, loaded on first use). */
export const sha256 = (): Crypto.Hash => crypto().createHash('sha256');

/**
 * Reading a text file in bounded pieces: whole lines of about CHUNK_BYTES each, with the
 * number of their first line, checked as strict UTF-8 (a bad byte is named by its file line,
 * as decodeUtf8 names it for a whole file) and with a byte-order mark dropped at the start of
 * the file only. Memory: one piece, whatever the file's size.
 */
export const CHUNK_BYTES = 1 << 22;

const BOM = [0xef, 0xbb, 0xbf];

function openOrThrow(path: string): number {
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch (error) {
    throw cannotRead(path, error);
  }
  try {
    refuseDevice(path, fstatSync(fd));
  } catch (error) {
    closeSync(fd);
    throw error;
  }
  return fd;
}

/** Paths that name this process's stdin or an inherited descriptor (a shell's <(...)), whatever they lead to. */
const STDIN_NAMES = /^\/(dev\/(stdin|fd\/\d+)|proc\/(self|\d+)\/fd\/\d+)$/;

/**
 * Throws IO_ERROR for an input that is a device (`stat`: the path's), unless the path names stdin
 * or an inherited descriptor: a device never ends (/dev/zero, /dev/urandom), and the readers grew
 * to 6.3 GB, or copied it into a temporary file without end.
 */
export function refuseDevice(path: string, stat: { isCharacterDevice(): boolean; isBlockDevice(): boolean }): void {
  if ((stat.isCharacterDevice() || stat.isBlockDevice()) && !STDIN_NAMES.test(path)) {
    throw new RolloutBudgetError('IO_ERROR', `${path}: a device, not a file: give a file, or - for stdin`);
  }
}

/** Bytes of the file, piece by piece, as long as `take` wants them; closes the file. */
function eachPiece(path: string, size: number, take: (bytes: Buffer, length: number) => void): void {
  const fd = openOrThrow(path);
  try {
    const buffer = Buffer.allocUnsafe(size);
    for (;;) {
      let length: number;
      try {
        length = readSync(fd, buffer, 0, size, null);
      } catch (error) {
        throw cannotRead(path, error);
      }
      if (length === 0) return;
      take(buffer, length);
    }
  } finally {
    closeSync(fd);
  }
}

/**
 * Throws IO_ERROR (`path: cannot read (CODE)`) unless the file can be opened and read (a missing
 * file, a folder, no permission), so a source can name such a file before a store opens.
 */
export function checkReadable(path: string): void {
  const fd = openOrThrow(path);
  try {
    readSync(fd, Buffer.allocUnsafe(1), 0, 1, 0);
  } catch (error) {
    throw cannotRead(path, error);
  } finally {
    closeSync(fd);
  }
}

/**
 * sha256 (hex) of the file's text as UTF-8, a leading byte-order mark left out: the digest
 * `digestOf` gives for the decoded text (io/results.ts), without holding it. O(size).
 */
export function fileDigest(path: string): string {
  const hash = sha256();
  let first = true;
  eachPiece(path, CHUNK_BYTES, (bytes, length) => {
    const skip = first && length >= 3 && bytes[0] === BOM[0] && bytes[1] === BOM[1] && bytes[2] === BOM[2] ? 3 : 0;
    first = false;
    hash.update(bytes.subarray(skip, length));
  });
  return hash.digest('hex');
}

/**
 * The file's text in pieces of whole lines (a piece ends after a newline, or at the end of
 * the file), each with its bytes (UTF-8, without the file's byte-order mark; valid until the
 * next piece is asked for) and the number of its first line. Bytes that are not UTF-8 throw BAD_INPUT
 * naming `name:line`. A line longer than a piece grows the piece. O(size).
 */
export function* lineChunks(path: string, name: string, chunkBytes = CHUNK_BYTES): Generator<{ text: string; bytes: Buffer; firstLine: number }> {
  const fd = openOrThrow(path);
  try {
    let buffer = Buffer.allocUnsafe(chunkBytes);
    let filled = 0;
    let firstLine = 1;
    let atStart = true;
    for (;;) {
      if (filled === buffer.length) {
        // No newline in the whole buffer: one line this long could never be decoded (utf8.ts), so stop before reading more of it.
        if (filled >= MAX_STRING_LENGTH) throw badInput(`${name}:${firstLine}`, `a line with no end after ${filled} bytes, ${TOO_LONG}`);
        buffer = Buffer.concat([buffer, Buffer.allocUnsafe(buffer.length)]);
      }
      let length: number;
      try {
        length = readSync(fd, buffer, filled, buffer.length - filled, null);
      } catch (error) {
        throw cannotRead(path, error);
      }
      filled += length;
      const end = length === 0 ? filled : buffer.lastIndexOf(0x0a, filled - 1) + 1;
      if (end > 0) {
        // A newline never occurs inside a UTF-8 sequence, so a piece cut after one decodes alone.
        const text = decodeUtf8(buffer.subarray(0, end), name, true, firstLine - 1, atStart);
        const bom = atStart && end >= 3 && BOM.every((b, k) => buffer[k] === b) ? 3 : 0;
        atStart = false;
        yield { text, bytes: buffer.subarray(bom, end), firstLine };
        for (let k = buffer.indexOf(0x0a); k >= 0 && k < end; k = buffer.indexOf(0x0a, k + 1)) firstLine++;
        buffer.copy(buffer, 0, end, filled);
        filled -= end;
      }
      if (length === 0) return;
    }
  } finally {
    closeSync(fd);
  }
}
