/**
 * The math verifier: extract the final `\boxed{...}` answer of a response, normalise it and the
 * ground truth (normalize.ts), and compare them: as strings, then as simple numbers, then by
 * shape and value (structure.ts, expr.ts) — so `\sqrt{8}` = `2\sqrt{2}`, `\frac{\pi}{2}` =
 * `\pi/2`, `2^{10}` = 1024, `\{1,2\}` = `\{2,1\}`, `(\frac12, 3)` = `(0.5, 3)`, `[1,2)` ≠ `(1,2)`,
 * and `50\%` = 0.5 = 50. No CAS: a symbolic engine was measured and not taken
 * (docs/executor.md). Every step is linear in its input, and answers longer than
 * MAX_ANSWER_CHARS are compared as trimmed strings (a 100 kB adversarial answer takes well under
 * a millisecond; `npm run bench`). Agreement with the Qwen2.5-Math suite's own labels is measured
 * on fixtures/qwen-math100-k8 (test/executor-verifier.test.ts; figures in docs/executor.md).
 */
import { close } from './expr.js';
import { MAX_ANSWER_CHARS, normalize, normalizeAnswer } from './normalize.js';
import { shapeOf, shapesEqual } from './structure.js';

export { MAX_ANSWER_CHARS, normalizeAnswer };

/** The content of the last `\boxed{...}` (or `\fbox{...}`, `\boxed x`), or null. O(length). */
export function lastBoxed(text: string): string | null {
  const boxed = text.lastIndexOf('\\boxed');
  const fbox = text.lastIndexOf('\\fbox');
  if (boxed < 0 && fbox < 0) return null;
  let i = boxed >= fbox ? boxed + 6 : fbox + 5;
  if (text[i] === ' ') {
    // "\boxed 5": the answer runs to the next "$" or whitespace (a sticky regex: one linear scan).
    const word = /[^\s$]+/y;
    word.lastIndex = i + 1;
    const m = word.exec(text);
    return m === null ? null : m[0];
  }
  if (text[i] !== '{') return null;
  let depth = 0;
  for (let j = i; j < text.length; j++) {
    if (text[j] === '{') depth++;
    else if (text[j] === '}') {
      depth--;
      if (depth === 0) return text.slice(i + 1, j);
    }
  }
  return null; // unbalanced: cut off mid-answer
}

/**
 * The value of a simple numeric answer: integer, decimal, a/b, \frac{a}{b}, a mixed number
 * a\frac{b}{c} (= a + b/c), each optionally negative; null for anything else.
 */
export function numericValue(s: string): number | null {
  let m = /^(-?)(\d+(?:\.\d+)?)$/.exec(s);
  if (m) return Number(m[1]! + m[2]!);
  m = /^(-?)(\d+(?:\.\d+)?)\/(\d+(?:\.\d+)?)$/.exec(s);
  if (m) return (m[1] === '-' ? -1 : 1) * (Number(m[2]) / Number(m[3]));
  m = /^(-?)\\frac\{(-?\d+(?:\.\d+)?)\}\{(-?\d+(?:\.\d+)?)\}$/.exec(s);
  if (m) return (m[1] === '-' ? -1 : 1) * (Number(m[2]) / Number(m[3]));
  m = /^(-?)(\d+)\\frac\{(\d+)\}\{(\d+)\}$/.exec(s);
  if (m) return (m[1] === '-' ? -1 : 1) * (Number(m[2]) + Number(m[3]) / Number(m[4]));
  return null;
}

/** A mixed number (12\frac{3}{5} = 12 + 3/5, not 12 · 3/5) as its decimal value; other text as is. */
function mixedAsValue(s: string): string {
  return /^-?\d+\\frac\{\d+\}\{\d+\}$/.test(s) ? String(numericValue(s)) : s;
}

/** Simple numbers by value, then shapes (sets, tuples, intervals, expressions). */
function sameValue(a: string, t: string): boolean {
  const x = numericValue(a);
  const y = numericValue(t);
  if (x !== null && y !== null) return close(x, y);
  return shapesEqual(shapeOf(mixedAsValue(a)), shapeOf(mixedAsValue(t)));
}

/**
 * True when a boxed answer equals the ground truth (see the module comment). A percent on
 * either side also matches the value divided by 100 (`50\%` = 0.5), as the Qwen suite allows.
 */
export function answersMatch(answer: string, truth: string): boolean {
  const a = normalize(answer);
  const t = normalize(truth);
  if (a.raw || t.raw) return answer.trim() === truth.trim();
  if (a.text === t.text) return true;
  if (a.text === '' || t.text === '') return false;
  if (sameValue(a.text, t.text)) return true;
  if (!a.percent && !t.percent) return false;
  const x = numericValue(a.text);
  const y = numericValue(t.text);
  if (x === null || y === null) return false;
  return (a.percent && close(x / 100, y)) || (t.percent && close(x, y / 100));
}

/** Reward of a response against its ground truth: 1 when its last boxed answer matches, else 0. */
export function mathReward(response: string, groundTruth: string): 0 | 1 {
  const boxed = lastBoxed(response);
  return boxed !== null && answersMatch(boxed, groundTruth) ? 1 : 0;
}
