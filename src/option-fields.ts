import type { PlanOptionsInput } from './plan/options.js';

/**
 * The plan options the front ends take, in one table: each option's field name, which errors,
 * the service's JSON (`options.min_n`) and the CLI's flags (`--min-n`, its words joined by
 * hyphens) share; where its value goes in the library's options (`minN`, or a key of the decay
 * group); and its JSON type. The service's request fields (service/requests.ts), the flag each
 * field's errors name (cli/flags.ts) and the CLI's flag values as options (cli/options.ts
 * planOptionsFrom) are read from it, so a new option is a row here, its range check in
 * resolvePlanOptions and its flag's declaration. The library's own keys are PlanOptions'
 * (plan/options.ts checkOptionKeys). Ranges are resolvePlanOptions' alone; `min` here is the
 * least integer a JSON field may hold before that check (a step ≥ 0, a count ≥ 1).
 */
export interface OptionField {
  /** The name errors, the service's JSON and the flag share (`min_n`, `--min-n`). */
  readonly field: string;
  /** Its key in PlanOptionsInput, or in its decay group when `group` is 'decay'. */
  readonly key: string;
  readonly group?: 'decay';
  /** int: a safe integer ≥ min; number: finite; boolean; name: a non-empty string (a registry's). */
  readonly kind: 'int' | 'number' | 'boolean' | 'name';
  readonly min?: number;
}

/** In the order the service lists them ("expected one of ..."). */
export const PLAN_OPTION_FIELDS: readonly OptionField[] = [
  { field: 'min_n', key: 'minN', kind: 'int', min: 1 },
  { field: 'max_n', key: 'maxN', kind: 'int', min: 1 },
  { field: 'skip', key: 'skip', kind: 'boolean' },
  { field: 'policy', key: 'policy', kind: 'name' },
  { field: 'value', key: 'value', kind: 'name' },
  { field: 'seed', key: 'seed', kind: 'int', min: 0 },
  { field: 'step', key: 'step', kind: 'int', min: 0 },
  { field: 'prefill_weight', key: 'prefillWeight', kind: 'number' },
  { field: 'decay', key: 'forgetPerStep', group: 'decay', kind: 'number' },
  { field: 'reobserve_discount', key: 'reobserveDiscount', group: 'decay', kind: 'number' },
  { field: 'multiple_of', key: 'multipleOf', kind: 'int', min: 1 },
  { field: 'rounds_left', key: 'roundsLeft', kind: 'int', min: 1 },
  { field: 'fresh_share', key: 'freshShare', kind: 'number' },
  { field: 'fresh_cap', key: 'freshCap', kind: 'number' },
];

/**
 * The options that `valueOf` gives for the table's fields (undefined: not given), each at its
 * key, the decay group only when one of its fields is given. `fields` limits the fields read
 * (the service's observe takes the decay pair only). O(fields).
 */
export function optionsFromFields(valueOf: (f: OptionField) => unknown, fields: readonly OptionField[] = PLAN_OPTION_FIELDS): PlanOptionsInput {
  const out: Record<string, unknown> = {};
  const decay: Record<string, unknown> = {};
  for (const f of fields) {
    const value = valueOf(f);
    if (value === undefined) continue;
    if (f.group === 'decay') decay[f.key] = value;
    else out[f.key] = value;
  }
  if (Object.keys(decay).length > 0) out.decay = decay;
  return out as PlanOptionsInput;
}

/** A field's words as commander keys a flag's value (`reobserve_discount` → `reobserveDiscount`). */
export function camelOf(field: string): string {
  return field.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());
}
