import { expressionsEqual, parseExpression, type Expr } from './expr.js';

/**
 * The shape of a normalised answer, so that answers made of several values compare as a grader
 * does: sets `\{1,2\}` and bare lists `1,2` (all solutions) in any order; tuples `(1,2)` and
 * intervals `[1,2)` in order, brackets included; unions `(-\infty,1)\cup(2,\infty)` part by part
 * in any order; a single value as an expression. O(length) to split; comparing k items O(k²)
 * (k ≤ 64; more: compared as strings only).
 */
export type Shape =
  | { readonly kind: 'value'; readonly text: string }
  | { readonly kind: 'set' | 'list'; readonly items: readonly string[] }
  | { readonly kind: 'seq'; readonly open: string; readonly close: string; readonly items: readonly string[] }
  | { readonly kind: 'union'; readonly parts: readonly Shape[] };

const MAX_ITEMS = 64;

/** Splits at top-level occurrences of `sep` (outside (), [], {}). O(length). */
export function splitTop(s: string, sep: string): string[] {
  const out: string[] = [];
  let depth = 0;
  let from = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s[i]!;
    if (c === '\\' && (s[i + 1] === '{' || s[i + 1] === '}')) {
      depth += s[i + 1] === '{' ? 1 : -1;
      i++;
    } else if (c === '(' || c === '[' || c === '{') depth++;
    else if (c === ')' || c === ']' || c === '}') depth--;
    else if (depth === 0 && s.startsWith(sep, i)) {
      out.push(s.slice(from, i));
      from = i + sep.length;
      i += sep.length - 1;
    }
  }
  out.push(s.slice(from));
  return out;
}

/** Whether the bracket opening at 0 closes at the very end (so the whole string is one group). */
function wraps(s: string): boolean {
  let depth = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s[i]!;
    if (c === '\\' && (s[i + 1] === '{' || s[i + 1] === '}')) {
      depth += s[i + 1] === '{' ? 1 : -1;
      i++;
      if (depth === 0 && i < s.length - 1) return false;
    } else if (c === '(' || c === '[' || c === '{') depth++;
    else if (c === ')' || c === ']' || c === '}') {
      depth--;
      if (depth === 0 && i < s.length - 1) return false;
    }
  }
  return depth === 0;
}

/** The shape of a normalised answer (see the type). */
export function shapeOf(s: string): Shape {
  const union = splitTop(s, '\\cup');
  if (union.length > 1 && union.length <= MAX_ITEMS) return { kind: 'union', parts: union.map(shapeOf) };
  if (s.startsWith('\\{') && s.endsWith('\\}') && wraps(s)) {
    return { kind: 'set', items: splitTop(s.slice(2, -2), ',') };
  }
  const open = s[0];
  const close = s[s.length - 1];
  if ((open === '(' || open === '[') && (close === ')' || close === ']') && s.length >= 2) {
    const inner = s.slice(1, -1);
    const items = splitTop(inner, ',');
    // "(2)" is a parenthesised value; "(1,2)", "[0,1)" are tuples or intervals. Only when the
    // brackets are one group: "(1)(2)" is a product.
    if (items.length > 1 && balanced(inner)) return { kind: 'seq', open, close, items };
  }
  const list = splitTop(s, ',');
  if (list.length > 1) return { kind: 'list', items: list };
  return { kind: 'value', text: s };
}

/** Brackets of all kinds balance in s (ignoring their kind, as an interval's do not match). */
function balanced(s: string): boolean {
  let depth = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s[i]!;
    if (c === '(' || c === '[' || c === '{') depth++;
    else if (c === ')' || c === ']' || c === '}') if (--depth < 0) return false;
  }
  return depth === 0;
}

/** Parsed expressions, memoised per comparison (an item may be compared several times). */
class Values {
  private readonly cache = new Map<string, Expr | null>();
  get(text: string): Expr | null {
    let e = this.cache.get(text);
    if (e === undefined) {
      e = parseExpression(text);
      this.cache.set(text, e);
    }
    return e;
  }
}

function itemsEqual(a: string, b: string, values: Values): boolean {
  if (a === b) return true;
  const x = values.get(a);
  const y = values.get(b);
  return x !== null && y !== null && expressionsEqual(x, y);
}

/** Every item of `a` matched to a distinct equal item of `b` (any order). O(k²). */
function sameItems(a: readonly string[], b: readonly string[], values: Values): boolean {
  if (a.length !== b.length || a.length > MAX_ITEMS) return false;
  const used = new Array<boolean>(b.length).fill(false);
  return a.every((x) => {
    const j = b.findIndex((y, k) => !used[k] && itemsEqual(x, y, values));
    if (j < 0) return false;
    used[j] = true;
    return true;
  });
}

/** Whether two shapes are the same answer (see the type for the rules). */
export function shapesEqual(a: Shape, b: Shape, values: Values = new Values()): boolean {
  if (a.kind === 'value' && b.kind === 'value') return itemsEqual(a.text, b.text, values);
  if (a.kind === 'seq' && b.kind === 'seq') {
    return a.open === b.open && a.close === b.close && a.items.length === b.items.length && a.items.every((x, i) => itemsEqual(x, b.items[i]!, values));
  }
  if ((a.kind === 'set' || a.kind === 'list') && a.kind === b.kind) return sameItems(a.items, b.items, values);
  if (a.kind === 'union' && b.kind === 'union') {
    if (a.parts.length !== b.parts.length) return false;
    const used = new Array<boolean>(b.parts.length).fill(false);
    return a.parts.every((p) => {
      const j = b.parts.findIndex((q, k) => !used[k] && shapesEqual(p, q, values));
      if (j < 0) return false;
      used[j] = true;
      return true;
    });
  }
  return false;
}
