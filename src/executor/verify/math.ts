/**
 * The math verifier: extract the final `\boxed{...}` answer of a response, normalise it and the
 * ground truth, and compare them as strings, then as numbers. Rules follow the spirit of the
 * Qwen2.5-Math evaluation suite's `strip_string` (whitespace, `\left`/`\right`, `\dfrac`,
 * units, trailing periods, thousands separators), without a CAS: equivalence beyond simple
 * numbers (0.5 = 1/2 = \frac{1}{2}, 12\frac{3}{5} = 63/5) is string equality after
 * normalisation. Agreement with the suite's own labels is measured on
 * fixtures/qwen-math100-k8 (test/executor-verifier.test.ts; figures in docs/executor.md).
 */

/** The content of the last `\boxed{...}` (or `\fbox{...}`, `\boxed x`), or null. O(length). */
export function lastBoxed(text: string): string | null {
  const at = Math.max(text.lastIndexOf('\\boxed'), text.lastIndexOf('\\fbox'));
  if (at < 0) return null;
  let i = text.indexOf(text.startsWith('\\boxed', at) ? '\\boxed' : '\\fbox', at);
  i += text.startsWith('\\boxed', at) ? 6 : 5;
  if (text[i] === ' ') {
    // "\boxed 5": the answer runs to the next "$" or whitespace.
    const rest = text.slice(i + 1);
    const m = /^[^\s$]+/.exec(rest);
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

/** Replaces `\cmd{...}` (balanced) with its content, everywhere. */
function unwrap(text: string, cmd: string): string {
  let out = text;
  for (;;) {
    const at = out.indexOf(`\\${cmd}{`);
    if (at < 0) return out;
    const open = at + cmd.length + 1;
    let depth = 0;
    let close = -1;
    for (let j = open; j < out.length; j++) {
      if (out[j] === '{') depth++;
      else if (out[j] === '}' && --depth === 0) {
        close = j;
        break;
      }
    }
    if (close < 0) return out;
    out = out.slice(0, at) + out.slice(open + 1, close) + out.slice(close + 1);
  }
}

const UNIT_WORDS =
  /(?:\\text\{\s*[a-zA-Z ]+\}|\\mbox\{\s*[a-zA-Z ]+\})\s*(?:\^\{?\d\}?)?$/;

/** Normalises an answer string for comparison (see the module comment). */
export function normalizeAnswer(raw: string): string {
  let s = raw.trim();
  s = s.replace(/\n/g, '').replace(/\\!/g, '').replace(/\\[,;: ]/g, '');
  s = s.replace(/\\left/g, '').replace(/\\right/g, '');
  s = s.replace(/\\[dt]frac/g, '\\frac');
  s = s.replace(/\^\{?\\circ\}?/g, '').replace(/\\%|%/g, '').replace(/\$/g, '');
  // Trailing units written as text ("10\text{ cm}", "5 \mbox{ inches}"), when a number precedes.
  if (/\d/.test(s.replace(UNIT_WORDS, ''))) s = s.replace(UNIT_WORDS, '');
  s = unwrap(unwrap(unwrap(s, 'text'), 'mathrm'), 'mbox');
  s = s.replace(/\{,\}/g, '');
  s = s.trim().replace(/[.\s]+$/, '');
  // "x = 5", "a=\frac12": keep the right-hand side when the left is a short symbol.
  const eq = /^\s*[a-zA-Z](?:_\{?\w+\}?)?\s*=\s*(.+)$/.exec(s);
  if (eq !== null) s = eq[1]!;
  s = s.replace(/\s+/g, '');
  // Thousands separators: 10,000 -> 10000 (only for comma groups of exactly three digits).
  if (/^-?\d{1,3}(,\d{3})+(\.\d+)?$/.test(s)) s = s.replace(/,/g, '');
  // \frac12 -> \frac{1}{2}, \frac1{2} -> \frac{1}{2}, \sqrt2 -> \sqrt{2}.
  s = s.replace(/\\frac(\d)(\d)/g, '\\frac{$1}{$2}').replace(/\\frac(\d)\{/g, '\\frac{$1}{');
  s = s.replace(/\\frac\{([^{}]+)\}(\d)/g, '\\frac{$1}{$2}');
  s = s.replace(/\\sqrt(\d+)/g, '\\sqrt{$1}');
  // Leading zero and trailing zeros of decimals: .5 -> 0.5, 2.50 -> 2.5, 3.0 -> 3.
  s = s.replace(/^\./, '0.').replace(/^-\./, '-0.');
  if (/^-?\d+\.\d+$/.test(s)) s = s.replace(/0+$/, '').replace(/\.$/, '');
  return s;
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

/** True when two normalised answers are the same string or the same simple number (rel. 1e-6). */
export function answersMatch(answer: string, truth: string): boolean {
  const a = normalizeAnswer(answer);
  const t = normalizeAnswer(truth);
  if (a === t) return true;
  const x = numericValue(a);
  const y = numericValue(t);
  if (x === null || y === null || !Number.isFinite(x) || !Number.isFinite(y)) return false;
  return Math.abs(x - y) <= 1e-6 * Math.max(1, Math.abs(y));
}

/** Reward of a response against its ground truth: 1 when its last boxed answer matches, else 0. */
export function mathReward(response: string, groundTruth: string): 0 | 1 {
  const boxed = lastBoxed(response);
  return boxed !== null && answersMatch(boxed, groundTruth) ? 1 : 0;
}
