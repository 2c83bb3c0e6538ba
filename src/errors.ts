/**
 * One error family for caller mistakes. Each carries a stable `code` and the CLI exit code.
 * Messages name the place (file:line or field path), quote the bad value, say what was expected.
 */
export type ErrorCode =
  | 'BAD_INPUT'
  | 'BAD_OPTION'
  | 'BUDGET_INFEASIBLE'
  | 'UNKNOWN_NAME'
  | 'DUPLICATE_NAME'
  | 'IO_ERROR'
  | 'STATE_ERROR'
  /** A plan ran past the service's deadline (--plan-timeout-s); HTTP 503. */
  | 'PLAN_TIMEOUT'
  /** The command was stopped (Ctrl-C, SIGTERM) after it wrote what it had; CLI exit 130 or 143. */
  | 'INTERRUPTED';

export class RolloutBudgetError extends Error {
  readonly code: ErrorCode;
  readonly exitCode: number;
  /**
   * The option fields the message names, in the library's terms (`min_n`, `skip`,
   * `budget_rollouts`, ...). A front end shows them in its own (withFieldNames): the CLI as
   * flags, the service as body fields.
   */
  readonly fields: readonly string[];
  /**
   * Whether the same request may succeed if sent again shortly, unchanged (a state database
   * that went away: store/unavailable.ts). The service says so in its error body
   * (`"retryable": true`) and with `Retry-After`; the Python clients retry then.
   */
  retryable = false;
  constructor(code: ErrorCode, message: string, exitCode = 2, fields: readonly string[] = []) {
    super(message);
    this.name = 'RolloutBudgetError';
    this.code = code;
    this.exitCode = exitCode;
    this.fields = fields;
  }
}

/**
 * The error with the option fields its message names renamed by `names` (fields without a
 * name stay as they are); the error itself when it names none. A name is replaced only as a
 * whole word, so `tokens` never matches inside `budget_tokens`, and never inside a quoted value
 * (errors quote what the caller gave with `quote`, in JSON's quotes): `--policy policy` read
 * `--policy: unknown name "--policy"`.
 */
export function withFieldNames(error: RolloutBudgetError, names: Readonly<Record<string, string>>): RolloutBudgetError {
  const fields = error.fields.filter((f) => names[f] !== undefined);
  if (fields.length === 0) return error;
  const pattern = new RegExp(`("(?:[^"\\\\]|\\\\.)*")|(?<![\\w-])(${fields.map(escape).join('|')})(?![\\w-])`, 'g');
  const message = error.message.replace(pattern, (match: string, quoted: string | undefined) => quoted ?? names[match]!);
  const renamed = new RolloutBudgetError(error.code, message, error.exitCode, error.fields.map((f) => names[f] ?? f));
  renamed.stack = error.stack;
  return renamed;
}

const escape = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/**
 * The name in `known` that `key` misspells only by case and underscores (`minN` for `min_n`,
 * `min_n` for `minN`), or undefined: the library's options are camelCase, the CLI's errors and
 * the service's fields snake_case, and a caller who wrote one for the other was told only "unknown".
 */
export function sameNameIn(key: string, known: readonly string[]): string | undefined {
  const squash = (k: string) => k.replaceAll('_', '').toLowerCase();
  return known.find((k) => squash(k) === squash(key));
}

/** Quotes a value for an error message: strings in JSON quotes, others as JSON, NaN as NaN, ±Infinity named as an overflow, an integer beyond 2^53 as one. */
/** "1 prompt has" / "2 prompts have": a count with its noun and verb in agreement. */
export function counted(count: number, noun: string, verbs: readonly [string, string] = ['has', 'have']): string {
  return count === 1 ? `1 ${noun} ${verbs[0]}` : `${count} ${noun}s ${verbs[1]}`;
}

export function quote(value: unknown): string {
  // JSON has no Infinity: a literal beyond the largest double (1e400) parses as one, so say so.
  if (typeof value === 'number' && !Number.isFinite(value)) return value !== value ? 'NaN' : `${value} (a number beyond ±1.8e308)`;
  // Beyond 2^53 a double skips integers: 9007199254740993 in a file reads as ...992, so say what was read.
  if (typeof value === 'number' && Number.isInteger(value) && !Number.isSafeInteger(value)) {
    return `${value} (as read: an integer beyond 2^53 − 1 = 9007199254740991, the largest a JSON number holds exactly)`;
  }
  if (value === undefined) return 'nothing';
  let text: string;
  try {
    text = JSON.stringify(value) ?? String(value);
  } catch {
    text = Array.isArray(value) ? '[...]' : typeof value === 'object' ? '{...}' : String(value); // too deep, or circular
  }
  return text.length > 80 ? `${text.slice(0, 77)}...` : text;
}

export function badInput(where: string, message: string): RolloutBudgetError {
  return new RolloutBudgetError('BAD_INPUT', `${where}: ${message}`);
}

/** A bad option; `fields` are the option fields the message names (see RolloutBudgetError.fields). */
export function badOption(message: string, fields: readonly string[] = []): RolloutBudgetError {
  return new RolloutBudgetError('BAD_OPTION', message, 2, fields);
}

/**
 * The IO_ERROR of a file that could not be read: `path: cannot read (CODE)`, and what a folder
 * given for a file is (EISDIR said only the code).
 */
export function cannotRead(path: string, error: unknown): RolloutBudgetError {
  const code = (error as NodeJS.ErrnoException).code ?? String(error);
  return new RolloutBudgetError('IO_ERROR', `${path}: cannot read (${code === 'EISDIR' ? 'EISDIR: it is a folder, not a file' : code})`);
}
