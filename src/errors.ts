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
  | 'PLAN_TIMEOUT';

export class RolloutBudgetError extends Error {
  readonly code: ErrorCode;
  readonly exitCode: number;
  constructor(code: ErrorCode, message: string, exitCode = 2) {
    super(message);
    this.name = 'RolloutBudgetError';
    this.code = code;
    this.exitCode = exitCode;
  }
}

/** Quotes a value for an error message: strings in JSON quotes, others as JSON, NaN as NaN. */
export function quote(value: unknown): string {
  if (typeof value === 'number' && !Number.isFinite(value)) return String(value);
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

export function badOption(message: string): RolloutBudgetError {
  return new RolloutBudgetError('BAD_OPTION', message);
}
