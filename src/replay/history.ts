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

/**
 * Per-prompt history of a policy's own groups, plus its mean tokens per rollout. O(1) a
 * rollout. Held in typed arrays, a slot a prompt (~190 bytes with its map entry, against
 * ~500 for an object with two arrays), updated in place: a replay of 10⁶ prompts keeps 10⁶
 * histories. `recent` is a window of the newest `keep` rewards; the last group is its tail,
 * kept apart only when longer than the window. get() makes a PromptHistory from the slot.
 */
export class History {
  private readonly slotOf = new Map<string, number>();
  private capacity = 0;
  /** Per slot: `keep` rewards, oldest first; how many are filled. */
  private recent = new Float64Array(0);
  private recentLength = new Int32Array(0);
  private lastLength = new Int32Array(0);
  private rollouts = new Float64Array(0);
  private easyStreak = new Int32Array(0);
  private hardStreak = new Int32Array(0);
  /** The last group's rewards where it is longer than `keep`. */
  private readonly longLast = new Map<number, number[]>();
  private tokenSum = 0;
  private tokenCount = 0;

  constructor(private readonly keep = 16) {}

  get(id: string): PromptHistory | undefined {
    const slot = this.slotOf.get(id);
    if (slot === undefined) return undefined;
    const from = slot * this.keep;
    const recent = Array.from(this.recent.subarray(from, from + this.recentLength[slot]!));
    const lastLength = this.lastLength[slot]!;
    const last = this.longLast.get(slot) ?? recent.slice(recent.length - lastLength);
    return { last, recent, rollouts: this.rollouts[slot]!, easyStreak: this.easyStreak[slot]!, hardStreak: this.hardStreak[slot]! };
  }

  /** Mean generated tokens per rollout so far, or undefined before any length was seen. */
  meanTokens(): number | undefined {
    return this.tokenCount > 0 ? this.tokenSum / this.tokenCount : undefined;
  }

  observe(groups: readonly GroupOutcome[]): void {
    const keep = this.keep;
    for (const g of groups) {
      const n = g.rewards.length;
      if (n === 0) continue;
      const slot = this.slot(g.prompt_id);
      const from = slot * keep;
      // The window: the newest `keep` of (what it held, then this group's rewards).
      const held = this.recentLength[slot]!;
      const stay = Math.min(held, Math.max(0, keep - n));
      this.recent.copyWithin(from, from + held - stay, from + held);
      const take = Math.min(n, keep);
      for (let j = 0; j < take; j++) this.recent[from + stay + j] = g.rewards[n - take + j]!;
      this.recentLength[slot] = stay + take;
      this.lastLength[slot] = n;
      if (n > keep) this.longLast.set(slot, [...g.rewards]);
      else this.longLast.delete(slot);
      this.rollouts[slot]! += n;
      const groupMean = mean(g.rewards);
      this.easyStreak[slot] = groupMean >= EASY_MEAN ? this.easyStreak[slot]! + 1 : 0;
      this.hardStreak[slot] = groupMean <= HARD_MEAN ? this.hardStreak[slot]! + 1 : 0;
      if (g.tokens !== null) {
        for (const t of g.tokens) this.tokenSum += t;
        this.tokenCount += g.tokens.length;
      }
    }
  }

  /** The prompt's slot, made (empty) on first use; the arrays double when full. */
  private slot(id: string): number {
    let slot = this.slotOf.get(id);
    if (slot !== undefined) return slot;
    slot = this.slotOf.size;
    if (slot === this.capacity) {
      const more = <T extends Float64Array | Int32Array>(a: T, per = 1): T => {
        const b = new (a.constructor as new (n: number) => T)(Math.max(1024, 2 * this.capacity) * per);
        b.set(a);
        return b;
      };
      this.recent = more(this.recent, this.keep);
      this.recentLength = more(this.recentLength);
      this.lastLength = more(this.lastLength);
      this.rollouts = more(this.rollouts);
      this.easyStreak = more(this.easyStreak);
      this.hardStreak = more(this.hardStreak);
      this.capacity = Math.max(1024, 2 * this.capacity);
    }
    this.slotOf.set(id, slot);
    return slot;
  }
}

/** Mean of a list; NaN when empty. */
export function mean(x: readonly number[]): number {
  return x.length === 0 ? NaN : x.reduce((a, b) => a + b, 0) / x.length;
}
