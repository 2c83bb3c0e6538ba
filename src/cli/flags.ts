import { PLAN_OPTION_FIELDS } from '../option-fields.js';

/**
 * The library's option fields as the CLI spells them: errors from the library name fields
 * (`min_n`, `skip`, ...), and the CLI shows the flag instead (errors.ts withFieldNames). A
 * field's flag is its words joined by hyphens: the plan options' (src/option-fields.ts), the
 * budgets' and the generating commands' counts.
 */
export const flagOfField: Readonly<Record<string, string>> = Object.fromEntries(
  [...PLAN_OPTION_FIELDS.map((f) => f.field), 'budget_rollouts', 'budget_tokens', 'rounds', 'steps'].map((field) => [field, `--${field.replace(/_/g, '-')}`]),
);
