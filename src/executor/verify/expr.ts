/**
 * A small LaTeX arithmetic reader for the math verifier: parses a normalised answer such as
 * `2\sqrt{2}`, `\frac{\pi}{2}`, `2^{10}`, `3(x+1)` or `-\infty` into a tree and evaluates it, so
 * equivalent closed forms compare equal by value. Grammar (precedence low → high):
 *
 *   sum     := product (('+' | '-') product)*
 *   product := unary (('*' | '/' | '\cdot' | '\times' | '\div' | implicit) unary)*
 *   unary   := ('-' | '+') unary | power
 *   power   := postfix ('^' group)?            (right-associative; -2^2 = -4)
 *   postfix := atom '!'*
 *   atom    := number | letter(_sub)? | '\pi' | '\infty' | '(' sum ')' | '{' sum '}'
 *            | '\frac' group group | '\sqrt' ('[' sum ']')? group | '\sin' | '\cos' | '\tan' | '\ln' atom
 *   group   := '{' sum '}' | one digit | one letter | '\pi'   (LaTeX reads one token: 2^10 is 2¹·0)
 *
 * Letters are variables: two expressions with variables are equal when they agree at three fixed
 * points. Time and space O(length) — one pass, no backtracking — with nesting depth capped at
 * 64 (deeper: not parsed). Inputs are at most MAX_ANSWER_CHARS long (normalize.ts).
 */
export type Expr =
  | { readonly k: 'num'; readonly v: number }
  | { readonly k: 'var'; readonly name: string }
  | { readonly k: 'neg'; readonly a: Expr }
  | { readonly k: 'bin'; readonly op: '+' | '-' | '*' | '/' | '^'; readonly a: Expr; readonly b: Expr }
  | { readonly k: 'fn'; readonly name: 'sqrt' | 'sin' | 'cos' | 'tan' | 'ln' | 'fact'; readonly a: Expr }
  | { readonly k: 'root'; readonly n: Expr; readonly a: Expr };

const MAX_DEPTH = 64;
const FUNCTIONS = new Set(['sin', 'cos', 'tan', 'ln']);

class Fail extends Error {}

class Parser {
  private i = 0;
  private depth = 0;
  constructor(private readonly s: string) {}

  parse(): Expr {
    const e = this.sum();
    if (this.i !== this.s.length) throw new Fail();
    return e;
  }

  private peek(): string {
    return this.s[this.i] ?? '';
  }

  private command(): string | null {
    if (this.s[this.i] !== '\\') return null;
    let j = this.i + 1;
    while (j < this.s.length && /[a-zA-Z]/.test(this.s[j]!)) j++;
    return j > this.i + 1 ? this.s.slice(this.i + 1, j) : null;
  }

  private eat(text: string): boolean {
    if (!this.s.startsWith(text, this.i)) return false;
    if (text.startsWith('\\') && /[a-zA-Z]/.test(this.s[this.i + text.length] ?? '')) return false;
    this.i += text.length;
    return true;
  }

  private enter(): void {
    if (++this.depth > MAX_DEPTH) throw new Fail();
  }

  private sum(): Expr {
    this.enter();
    let e = this.product();
    for (;;) {
      const c = this.peek();
      if (c !== '+' && c !== '-') break;
      this.i++;
      e = { k: 'bin', op: c, a: e, b: this.product() };
    }
    this.depth--;
    return e;
  }

  private startsAtom(): boolean {
    const c = this.peek();
    if (/[0-9a-zA-Z.({]/.test(c)) return true;
    const cmd = this.command();
    return cmd !== null && (cmd === 'pi' || cmd === 'infty' || cmd === 'frac' || cmd === 'sqrt' || FUNCTIONS.has(cmd));
  }

  private product(): Expr {
    let e = this.unary();
    for (;;) {
      if (this.eat('*') || this.eat('\\cdot') || this.eat('\\times')) e = { k: 'bin', op: '*', a: e, b: this.unary() };
      else if (this.eat('/') || this.eat('\\div')) e = { k: 'bin', op: '/', a: e, b: this.unary() };
      else if (this.startsAtom()) e = { k: 'bin', op: '*', a: e, b: this.power() };
      else return e;
    }
  }

  private unary(): Expr {
    if (this.eat('-')) {
      this.enter();
      const a = this.unary();
      this.depth--;
      return { k: 'neg', a };
    }
    if (this.eat('+')) return this.unary();
    return this.power();
  }

  private power(): Expr {
    const base = this.postfix();
    if (!this.eat('^')) return base;
    this.enter();
    const exp = this.peek() === '-' ? (this.i++, { k: 'neg', a: this.group() } as Expr) : this.group();
    const e: Expr = { k: 'bin', op: '^', a: base, b: exp };
    this.depth--;
    return e;
  }

  private postfix(): Expr {
    let e = this.atom();
    while (this.eat('!')) e = { k: 'fn', name: 'fact', a: e };
    return e;
  }

  /** One LaTeX argument: a braced sum, or a single digit, letter or command atom. */
  private group(): Expr {
    const c = this.peek();
    if (c === '{') return this.atom();
    if (/[0-9]/.test(c)) {
      this.i++;
      return { k: 'num', v: Number(c) };
    }
    if (/[a-zA-Z]/.test(c)) {
      this.i++;
      return { k: 'var', name: c };
    }
    if (this.command() !== null) return this.atom();
    throw new Fail();
  }

  private atom(): Expr {
    const c = this.peek();
    if (c === '(' || c === '{') {
      this.i++;
      const e = this.sum();
      if (!this.eat(c === '(' ? ')' : '}')) throw new Fail();
      return e;
    }
    if (/[0-9.]/.test(c)) {
      const start = this.i;
      while (/[0-9]/.test(this.peek())) this.i++;
      if (this.peek() === '.') {
        this.i++;
        while (/[0-9]/.test(this.peek())) this.i++;
      }
      const text = this.s.slice(start, this.i);
      if (text === '.' ) throw new Fail();
      return { k: 'num', v: Number(text) };
    }
    if (/[a-zA-Z]/.test(c)) {
      this.i++;
      let name = c;
      if (this.peek() === '_') {
        this.i++;
        const sub = this.peek() === '{' ? this.braced() : this.s[this.i++] ?? '';
        if (!/^[0-9a-zA-Z]+$/.test(sub)) throw new Fail();
        name += `_${sub}`;
      }
      return { k: 'var', name };
    }
    const cmd = this.command();
    if (cmd === null) throw new Fail();
    this.i += cmd.length + 1;
    this.enter();
    let e: Expr;
    if (cmd === 'pi') e = { k: 'num', v: Math.PI };
    else if (cmd === 'infty') e = { k: 'num', v: Infinity };
    else if (cmd === 'frac') e = { k: 'bin', op: '/', a: this.group(), b: this.group() };
    else if (cmd === 'sqrt') {
      if (this.eat('[')) {
        const n = this.sum();
        if (!this.eat(']')) throw new Fail();
        e = { k: 'root', n, a: this.group() };
      } else e = { k: 'fn', name: 'sqrt', a: this.group() };
    } else if (FUNCTIONS.has(cmd)) e = { k: 'fn', name: cmd as 'sin', a: this.power() };
    else throw new Fail();
    this.depth--;
    return e;
  }

  /** The text of a `{...}` without nesting (subscripts). */
  private braced(): string {
    const close = this.s.indexOf('}', this.i);
    if (close < 0) throw new Fail();
    const text = this.s.slice(this.i + 1, close);
    this.i = close + 1;
    return text;
  }
}

/** A run of three or more letters that is not a command: a word ("east", "Monday"), not a product. */
const WORD = /(?:^|[^\\a-zA-Z])[a-zA-Z]{3,}/;

/**
 * Parses a normalised answer (no whitespace) into an expression, or null when it is not one
 * (including text with a word of three or more letters: "seat" is not e·a·s·t). O(length).
 */
export function parseExpression(s: string): Expr | null {
  if (s.length === 0 || WORD.test(s)) return null;
  try {
    return new Parser(s).parse();
  } catch (error) {
    if (error instanceof Fail) return null;
    throw error;
  }
}

function factorial(n: number): number {
  if (!Number.isInteger(n) || n < 0 || n > 170) return NaN;
  let f = 1;
  for (let k = 2; k <= n; k++) f *= k;
  return f;
}

/** The value of an expression with variables taken from `env` (missing: NaN). O(size). */
export function evaluate(e: Expr, env: ReadonlyMap<string, number>): number {
  switch (e.k) {
    case 'num':
      return e.v;
    case 'var':
      return env.get(e.name) ?? NaN;
    case 'neg':
      return -evaluate(e.a, env);
    case 'root': {
      const n = evaluate(e.n, env);
      const a = evaluate(e.a, env);
      return a < 0 && Number.isInteger(n) && n % 2 === 1 ? -((-a) ** (1 / n)) : a ** (1 / n);
    }
    case 'fn': {
      const a = evaluate(e.a, env);
      if (e.name === 'fact') return factorial(a);
      if (e.name === 'ln') return Math.log(a);
      return Math[e.name](a);
    }
    case 'bin': {
      const a = evaluate(e.a, env);
      const b = evaluate(e.b, env);
      if (e.op === '+') return a + b;
      if (e.op === '-') return a - b;
      if (e.op === '*') return a * b;
      if (e.op === '/') return a / b;
      return a ** b;
    }
  }
}

/** Variable names of an expression. */
export function variables(e: Expr, out: Set<string> = new Set()): Set<string> {
  if (e.k === 'var') out.add(e.name);
  else if (e.k === 'neg' || e.k === 'fn') variables(e.a, out);
  else if (e.k === 'root') {
    variables(e.n, out);
    variables(e.a, out);
  } else if (e.k === 'bin') {
    variables(e.a, out);
    variables(e.b, out);
  }
  return out;
}

/** |x − y| ≤ 1e-6 · max(1, |y|), or the same infinity. */
export function close(x: number, y: number): boolean {
  if (!Number.isFinite(x) || !Number.isFinite(y)) return x === y && !Number.isNaN(x);
  return Math.abs(x - y) <= 1e-6 * Math.max(1, Math.abs(y));
}

/** Points where expressions with variables are compared: irrational-ish, distinct per variable. */
const POINTS = [
  (k: number) => 0.5413 + 0.7171 * k,
  (k: number) => 1.3791 + 0.3137 * k,
  (k: number) => 2.0317 - 0.4519 * k,
];

/**
 * Whether two expressions are equal: by value when neither has variables, else at three fixed
 * points (at least two where both sides are defined). O(size of both).
 */
export function expressionsEqual(a: Expr, b: Expr): boolean {
  const names = [...variables(a, variables(b))].sort();
  if (names.length === 0) return close(evaluate(a, new Map()), evaluate(b, new Map()));
  if (names.length > 8) return false;
  let defined = 0;
  for (const point of POINTS) {
    const env = new Map(names.map((n, k) => [n, point(k)]));
    const x = evaluate(a, env);
    const y = evaluate(b, env);
    if (Number.isNaN(x) && Number.isNaN(y)) continue;
    if (!close(x, y)) return false;
    defined++;
  }
  return defined >= 2;
}
