import type { GroupStats, PromptState } from './state.js';

/**
 * The most tokens a count may say (10⁷): a rollout, a prompt or a limit longer than the longest
 * context any model serves. One results line saying 2⁵³ − 1 tokens was taken, and the pooled
 * mean length (1.6·10¹³) cut every later token-budget plan to a quarter of its prompts.
 */
export const MAX_TOKEN_COUNT = 10_000_000;

/**
 * Expected generated tokens of one rollout of a prompt.
 *
 * L_correct and L_wrong are the prompt's mean token counts for correct (reward ≥ 0.5) and
 * wrong rollouts, each shrunk toward its group's mean with `shrinkage` pseudo-rollouts:
 * L = (Σ tokens + k·G) / (count + k). The cost of a rollout is then
 * c = p̄·L_correct + (1 − p̄)·L_wrong, with p̄ the posterior mean, capped by max_tokens.
 * Wrong answers run longer (long-CoT on AIME: 9,233 vs 4,856 tokens, CALIBRATION.md), so a
 * hard prompt costs more a rollout. Group means fall back to all prompts, then to the other
 * class, then to the candidate's max_tokens, else the option `defaultTokens` (1024); the
 * estimate is then `assumed`, and the planner lists such prompts in the plan's warnings.
 */
export interface LengthOptions {
  readonly shrinkage: number;
  readonly defaultTokens: number;
}

export const defaultLengthOptions: LengthOptions = { shrinkage: 4, defaultTokens: 1024 };

export interface LengthEstimate {
  readonly tokens: number;
  /** True when nothing was known of this prompt's or any prompt's lengths. */
  readonly assumed: boolean;
}

function mean(sum: number, count: number): number | undefined {
  return count > 0 ? sum / count : undefined;
}

/**
 * O(1). The estimate is written into `out` when given (and returned): a planner's one object
 * for all its prompts, not one a prompt.
 */
export function expectedTokens(
  state: PromptState | undefined,
  group: GroupStats | undefined,
  all: GroupStats,
  pMean: number,
  maxTokens: number | undefined,
  opts: LengthOptions,
  out: { tokens: number; assumed: boolean } = { tokens: 0, assumed: false },
): LengthEstimate {
  const gc = mean(group?.correctTokens ?? 0, group?.correctCount ?? 0) ?? mean(all.correctTokens, all.correctCount);
  const gw = mean(group?.wrongTokens ?? 0, group?.wrongCount ?? 0) ?? mean(all.wrongTokens, all.wrongCount);
  const fallback = maxTokens ?? opts.defaultTokens;
  const assumed = gc === undefined && gw === undefined;
  const baseC = gc ?? gw ?? fallback;
  const baseW = gw ?? gc ?? fallback;
  const k = opts.shrinkage;
  const lc = ((state?.correctTokens ?? 0) + k * baseC) / ((state?.correctCount ?? 0) + k);
  const lw = ((state?.wrongTokens ?? 0) + k * baseW) / ((state?.wrongCount ?? 0) + k);
  const tokens = pMean * lc + (1 - pMean) * lw;
  out.tokens = maxTokens === undefined ? tokens : Math.min(tokens, maxTokens);
  out.assumed = assumed && (state?.correctCount ?? 0) + (state?.wrongCount ?? 0) === 0;
  return out;
}
