import type { GroupOutcome } from './types.js';

/** What a baseline remembers of one prompt: its own earlier groups only. */
export interface PromptHistory {
  /** Rewards of the last group. */
  last: number[];
  /** The most recent rewards across groups, newest last, at most `keep`. */
  recent: number[];
  rollouts: number;
  /**
   * Consecutive latest groups with mean reward ≥ 0.98 / ≤ 0.11: GRESO's easy and hard streaks
   * (presampling_selector.py: with 8 rollouts, all correct / all wrong).
   */
  easyStreak: number;
  hardStreak: number;
}

/** GRESO's thresholds on a group's mean reward: easy at ≥ 0.98, hard at ≤ 0.11. */
export const EASY_MEAN = 0.98;
export const HARD_MEAN = 0.11;

/** Per-prompt history of a policy's own groups, plus its mean tokens per rollout. O(1) a rollout. */
export class History {
  private readonly byId = new Map<string, PromptHistory>();
  private tokenSum = 0;
  private tokenCount = 0;

  constructor(private readonly keep = 16) {}

  get(id: string): PromptHistory | undefined {
    return this.byId.get(id);
  }

  /** Mean generated tokens per rollout so far, or undefined before any length was seen. */
  meanTokens(): number | undefined {
    return this.tokenCount > 0 ? this.tokenSum / this.tokenCount : undefined;
  }

  observe(groups: readonly GroupOutcome[]): void {
    for (const g of groups) {
      if (g.rewards.length === 0) continue;
      let h = this.byId.get(g.prompt_id);
      if (h === undefined) this.byId.set(g.prompt_id, (h = { last: [], recent: [], rollouts: 0, easyStreak: 0, hardStreak: 0 }));
      h.last = [...g.rewards];
      h.recent.push(...g.rewards);
      if (h.recent.length > this.keep) h.recent.splice(0, h.recent.length - this.keep);
      h.rollouts += g.rewards.length;
      const groupMean = mean(g.rewards);
      h.easyStreak = groupMean >= EASY_MEAN ? h.easyStreak + 1 : 0;
      h.hardStreak = groupMean <= HARD_MEAN ? h.hardStreak + 1 : 0;
      if (g.tokens !== null) {
        for (const t of g.tokens) this.tokenSum += t;
        this.tokenCount += g.tokens.length;
      }
    }
  }
}

/** Mean of a list; NaN when empty. */
export function mean(x: readonly number[]): number {
  return x.length === 0 ? NaN : x.reduce((a, b) => a + b, 0) / x.length;
}
