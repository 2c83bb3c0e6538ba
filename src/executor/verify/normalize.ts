/**
 * Normalisation of a boxed answer or a ground truth before comparison, in the spirit of the
 * Qwen2.5-Math evaluation suite's `strip_string`: whitespace, `\left`/`\right`, `\!` and other
 * spacing, `\dfrac`/`\tfrac` → `\frac`, `\frac12`, degrees, `%` (remembered), `$`, trailing
 * `\text{units}` and periods, `\text{}` wrappers, `x =` prefixes, thousands separators
 * (`10{,}000`, `50,625`), trailing zeros of decimals.
 *
 * Time O(length): every regex below is either anchored at one end with a bounded pattern or
 * a plain global replace of a fixed token (no nested quantifiers over the same characters), and
 * answers longer than MAX_ANSWER_CHARS are not normalised at all (compared as trimmed strings):
 * model outputs reach 100 kB, a real final answer is a few dozen characters (at most 22 in the
 * 400 real responses of fixtures/qwen-math100-k8).
 */
export const MAX_ANSWER_CHARS = 1000;

/** A normalised answer: its text, and whether it carried a percent sign. */
export interface Normalized {
  readonly text: string;
  readonly percent: boolean;
  /** True when the input was longer than MAX_ANSWER_CHARS and left as the trimmed input. */
  readonly raw: boolean;
}

/** Replaces every `\cmd{...}` (balanced braces) with its content, in one left-to-right pass. O(length). */
export function unwrap(text: string, cmd: string): string {
  const open = `\\${cmd}{`;
  let out = '';
  let from = 0;
  for (;;) {
    const at = text.indexOf(open, from);
    if (at < 0) return out + text.slice(from);
    let depth = 0;
    let close = -1;
    for (let j = at + open.length - 1; j < text.length; j++) {
      if (text[j] === '{') depth++;
      else if (text[j] === '}' && --depth === 0) {
        close = j;
        break;
      }
    }
    if (close < 0) return out + text.slice(from);
    out += text.slice(from, at) + text.slice(at + open.length, close);
    from = close + 1;
  }
}

/**
 * Cuts a trailing unit written as text (`10\text{ cm}`, `5 \mbox{ inches}^2`) when a digit comes
 * before it. One scan from the last `\text{` / `\mbox{`. O(length).
 */
function dropTrailingUnit(s: string): string {
  const at = Math.max(s.lastIndexOf('\\text{'), s.lastIndexOf('\\mbox{'));
  if (at < 0) return s;
  const close = s.indexOf('}', at);
  if (close < 0) return s;
  const word = s.slice(at + 6, close);
  if (!/^\s*[a-zA-Z ]+$/.test(word)) return s;
  if (!/^\s*(?:\^\{?\d\}?)?\s*$/.test(s.slice(close + 1))) return s;
  return /\d/.test(s.slice(0, at)) ? s.slice(0, at) : s;
}

/** Drops trailing periods and whitespace. O(length). */
function trimPeriods(s: string): string {
  let end = s.length;
  while (end > 0 && (s[end - 1] === '.' || /\s/.test(s[end - 1]!))) end--;
  return s.slice(0, end);
}

/** Normalises an answer string for comparison (see the module comment). O(length). */
export function normalize(input: string): Normalized {
  const trimmed = input.trim();
  if (trimmed.length > MAX_ANSWER_CHARS) return { text: trimmed, percent: false, raw: true };
  let s = trimmed.replace(/\n/g, '').replace(/\\[,;: !]/g, '');
  s = s.replace(/\\(?:left|right)(?![a-zA-Z])/g, '').replace(/\\big(?:g|l|r|gl|gr)?(?![a-zA-Z])/gi, '');
  s = s.replace(/\\[dt]frac(?![a-zA-Z])/g, '\\frac');
  s = s.replace(/\^\{?\\circ\}?/g, '').replace(/\u00b0/g, '');
  const percent = /%/.test(s);
  s = s.replace(/\\%|%/g, '').replace(/\\\$/g, '').replace(/\$/g, '');
  s = dropTrailingUnit(s);
  for (const cmd of ['text', 'mathrm', 'mbox', 'textbf', 'mathbf']) s = unwrap(s, cmd);
  s = s.replace(/\{,\}/g, '');
  s = trimPeriods(s.trim());
  // "x = 5", "a=\frac12": keep the right-hand side when the left is one (subscripted) letter.
  const eq = /^([a-zA-Z](?:_\{?\w+\}?)?)\s*=/.exec(s);
  if (eq !== null && !s.slice(eq[0].length).includes('=')) s = s.slice(eq[0].length);
  s = s.replace(/\s+/g, '');
  // Thousands separators: 10,000 -> 10000 (only comma groups of exactly three digits).
  if (/^-?\d{1,3}(?:,\d{3})+(?:\.\d+)?$/.test(s)) s = s.replace(/,/g, '');
  // \frac12 -> \frac{1}{2}, \frac1{2} -> \frac{1}{2}, \frac{a}2 -> \frac{a}{2}, \sqrt2 -> \sqrt{2}.
  s = s.replace(/\\frac(\d)(\d)/g, '\\frac{$1}{$2}').replace(/\\frac(\d)\{/g, '\\frac{$1}{');
  s = s.replace(/\\frac\{([^{}]*)\}(\d)/g, '\\frac{$1}{$2}');
  s = s.replace(/\\sqrt(\d)/g, '\\sqrt{$1}');
  // Leading zero and trailing zeros of decimals: .5 -> 0.5, 2.50 -> 2.5, 3.0 -> 3.
  if (s.startsWith('.')) s = `0${s}`;
  else if (s.startsWith('-.')) s = `-0${s.slice(1)}`;
  if (/^-?\d+\.\d+$/.test(s)) s = s.replace(/\.?0+$/, '');
  return { text: s, percent, raw: false };
}

/** The normalised text of an answer (see normalize). O(length). */
export function normalizeAnswer(raw: string): string {
  return normalize(raw).text;
}
