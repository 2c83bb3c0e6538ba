import { readFileSync } from 'node:fs';
import { RolloutBudgetError, badInput, quote } from '../errors.js';
import { checkHint } from '../posterior/hints.js';

/** One parsed JSONL line with where it came from. */
export interface Located<T> {
  readonly where: string;
  readonly line: number;
  readonly value: T;
}

/** Reads a file as UTF-8 text, or throws IO_ERROR naming the path and the reason. */
export function readText(path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (error) {
    const reason = (error as NodeJS.ErrnoException).code ?? String(error);
    throw new RolloutBudgetError('IO_ERROR', `${path}: cannot read (${reason})`);
  }
}

/**
 * Parses JSONL text into objects, skipping blank lines. A line that is not a JSON object is
 * an error naming `name:line`. O(size of text).
 */
export function parseJsonl(text: string, name: string): Located<Record<string, unknown>>[] {
  const out: Located<Record<string, unknown>>[] = [];
  let line = 0;
  let start = 0;
  while (start <= text.length) {
    let end = text.indexOf('\n', start);
    if (end < 0) end = text.length;
    line++;
    const raw = text.slice(start, end).trim();
    start = end + 1;
    if (raw === '') continue;
    let value: unknown;
    try {
      value = JSON.parse(raw);
    } catch (error) {
      throw badInput(`${name}:${line}`, `malformed JSON (${(error as Error).message}): ${quote(raw)}`);
    }
    if (value === null || typeof value !== 'object' || Array.isArray(value)) {
      throw badInput(`${name}:${line}`, `each line must be a JSON object, got ${quote(value)}`);
    }
    out.push({ where: `${name}:${line}`, line, value: value as Record<string, unknown> });
  }
  return out;
}

/** Field checks shared by the input formats; each names the place, field and bad value. */
export const field = {
  string(where: string, obj: Record<string, unknown>, key: string, required: boolean): string | undefined {
    const v = obj[key];
    if (v === undefined && !required) return undefined;
    if (typeof v !== 'string' || v.length === 0) throw badInput(where, `"${key}" must be a non-empty string, got ${quote(v)}`);
    return v;
  },
  int(where: string, obj: Record<string, unknown>, key: string, min: number): number | undefined {
    const v = obj[key];
    if (v === undefined) return undefined;
    if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < min) {
      throw badInput(where, `"${key}" must be ${min > 0 ? 'a positive' : 'a non-negative'} integer, got ${quote(v)}`);
    }
    return v;
  },
  /** An optional array of rewards, numbers in [0, 1] (e.g. `partial_rewards`). */
  rewards(where: string, obj: Record<string, unknown>, key: string): readonly number[] | undefined {
    const v = obj[key];
    if (v === undefined) return undefined;
    if (!Array.isArray(v)) throw badInput(where, `"${key}" must be an array of rewards in [0, 1], got ${quote(v)}`);
    v.forEach((r, j) => {
      if (typeof r !== 'number' || !(r >= 0 && r <= 1)) throw badInput(where, `"${key}[${j}]" must be a number in [0, 1], got ${quote(r)}`);
    });
    return v as number[];
  },
  /** An offline difficulty hint (`prior_pass_rate`, `prior_samples`): posterior/hints.ts checkHint. */
  hint: checkHint,
  reward(where: string, key: string, v: unknown): number {
    if (typeof v === 'boolean') return v ? 1 : 0;
    if (typeof v !== 'number' || !Number.isFinite(v) || v < 0 || v > 1) {
      throw badInput(where, `"${key}" must be a number in [0, 1], got ${quote(v)}`);
    }
    return v;
  },
};
