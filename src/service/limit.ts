import { badOption, quote } from '../errors.js';
import { MAX_STRING_LENGTH } from '../io/utf8.js';

/** A body or line limit in bytes: an integer in [1, MAX_STRING_LENGTH] (serveStdio's lineLimit too). O(1). */
export function checkLimit(name: string, limit: unknown): void {
  if (typeof limit !== 'number' || !Number.isSafeInteger(limit) || limit < 1 || limit > MAX_STRING_LENGTH) {
    throw badOption(`${name} must be an integer from 1 to ${MAX_STRING_LENGTH} bytes, got ${quote(limit)}`, [name]);
  }
}
