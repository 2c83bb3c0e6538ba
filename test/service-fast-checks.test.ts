import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { RolloutBudgetError } from '../src/index.js';
import { checkCandidate } from '../src/io/formats.js';
import { MAX_JSON_DEPTH, parseJson } from '../src/io/jsonl.js';
import { parseJsonFast, plainCandidateId } from '../src/service/fast-checks.js';

/**
 * The service's quicker request checks (service/fast-checks.ts) against the careful ones they
 * stand for: the same value or the same error for every text, and a candidate taken as plain
 * only when checkCandidate accepts it with the same id.
 */

/** What a call gives: its value, or its error's code and message. */
function outcome(f: () => unknown): unknown {
  try {
    return { value: f() };
  } catch (error) {
    if (!(error instanceof RolloutBudgetError)) throw error;
    return { code: error.code, message: error.message };
  }
}

const VALUES = ['"a"', '""', '"p-1"', '"é"', '"a\\nb"', '"\\u0000"', '"x\\u0000"', '"\\ud800"', '"\\udc00x"', '"\\ud83d\\ude00"', '"\\u0041"', '"\u2028"', '" "',
  '0', '-0', '1', '2', '3072', '0.5', '1.0', '1e0', '1E-2', '-1', '9007199254740991', '9007199254740993', '1e400', 'true', 'false', 'null',
  '[]', '[0.5,1]', '[2]', '{}', '{"a":1}', '[[[[1]]]]'];
const KEYS = ['id', 'id', 'id', 'prompt_tokens', 'max_tokens', 'group', 'partial_rewards', 'prior_pass_rate', 'prior_samples', 'x', '__proto__', 'é', ''];

/** A candidate's JSON text: usually an object of a few tricky fields, sometimes not an object. */
const candidateText = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.tuple(fc.constantFrom('"a"', '"p-1"', '"é"', '"\\ud83d\\ude00"', '"x\\u0000"', '""'), fc.array(fc.tuple(fc.constantFrom(...KEYS.slice(3)), fc.constantFrom('0', '1', '3072', '-1', '1.5', '"g"', '""', 'null')), { maxLength: 3 }))
      .map(([id, fs]) => `{"id":${id}${fs.map(([k, v]) => `,"${k}":${v}`).join('')}}`),
  },
  { weight: 6, arbitrary: fc.array(fc.tuple(fc.constantFrom(...KEYS), fc.constantFrom(...VALUES)), { maxLength: 4 }).map((fs) => `{${fs.map(([k, v]) => `"${k}":${v}`).join(',')}}`) },
  { weight: 1, arbitrary: fc.constantFrom(...VALUES) },
);

/** A plan body: candidates (sometimes repeating an id), a budget, now and then junk, odd nesting or a cut. */
const bodyText = fc.tuple(fc.array(candidateText, { maxLength: 6 }), fc.constantFrom('{"rollouts":8}', '{}', '{"rollouts":-1}', '7'), fc.nat(9), fc.nat(40))
  .map(([cands, budget, twist, cut]) => {
    const text = `{"candidates":[${cands.join(',')}],"budget":${budget}}`;
    if (twist === 0) return text.slice(0, cut);
    if (twist === 1) return `${'['.repeat(MAX_JSON_DEPTH - 1 + (cut % 3))}${text}${']'.repeat(MAX_JSON_DEPTH - 1 + (cut % 3))}`;
    if (twist === 2) return `{"candidates":[${'{"x":'.repeat(MAX_JSON_DEPTH - 3 + (cut % 4))}1${'}'.repeat(MAX_JSON_DEPTH - 3 + (cut % 4))}],"budget":{"rollouts":8}}`;
    if (twist === 3) return text.replace('"budget"', '"extra":1,"budget"');
    return text;
  });

describe("the service's fast request checks", () => {
  it('parseJsonFast gives what parseJson gives: the value, or the same error (depth before syntax)', () => {
    let deep = 0;
    fc.assert(fc.property(bodyText, (text) => {
      const want = outcome(() => parseJson(text, 'body'));
      expect(outcome(() => parseJsonFast(text, 'body'))).toStrictEqual(want);
      if (JSON.stringify(want).includes('nested deeper')) deep++;
    }), { numRuns: 3000, seed: 15 });
    expect(deep).toBeGreaterThan(50);
  });

  it('a candidate taken as plain is one checkCandidate accepts, with the same id', () => {
    let plain = 0;
    let careful = 0;
    fc.assert(fc.property(candidateText, (text) => {
      const item: unknown = JSON.parse(text);
      const id = plainCandidateId(item);
      if (id === undefined) {
        careful++;
        return;
      }
      plain++;
      expect(checkCandidate('c', item as Record<string, unknown>)).toBe(id);
    }), { numRuns: 5000, seed: 16 });
    expect(plain).toBeGreaterThan(300);
    expect(careful).toBeGreaterThan(300);
  });
});
