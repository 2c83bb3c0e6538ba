/**
 * The library's option fields as the CLI spells them: errors from the library name fields
 * (`min_n`, `skip`, ...), and the CLI shows the flag instead (errors.ts withFieldNames).
 */
export const flagOfField: Readonly<Record<string, string>> = {
  budget_rollouts: '--budget-rollouts',
  budget_tokens: '--budget-tokens',
  min_n: '--min-n',
  max_n: '--max-n',
  skip: '--skip',
  policy: '--policy',
  value: '--value',
  seed: '--seed',
  step: '--step',
  prefill_weight: '--prefill-weight',
  decay: '--decay',
  reobserve_discount: '--reobserve-discount',
  rounds_left: '--rounds-left',
  fresh_share: '--fresh-share',
  fresh_cap: '--fresh-cap',
  rounds: '--rounds',
  steps: '--steps',
  multiple_of: '--multiple-of',
};
