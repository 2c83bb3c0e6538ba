import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { EASY_MEAN, HARD_MEAN, History, type PromptHistory } from '../src/index.js';

/**
 * History keeps its prompts in typed arrays (replay/history.ts). It must answer as the plain
 * per-prompt record it replaced: last group, newest `keep` rewards, rollouts, streaks,
 * mean tokens, over any sequence of groups (longer and shorter than the window, fractional
 * rewards, -0, prompts seen once or often, groups without rollouts).
 */
class ReferenceHistory {
  private readonly byId = new Map<string, PromptHistory>();
  private tokenSum = 0;
  private tokenCount = 0;
  constructor(private readonly keep: number) {}
  get(id: string) {
    return this.byId.get(id);
  }
  meanTokens() {
    return this.tokenCount > 0 ? this.tokenSum / this.tokenCount : undefined;
  }
  observe(groups: { prompt_id: string; rewards: number[]; tokens: number[] | null }[]) {
    for (const g of groups) {
      if (g.rewards.length === 0) continue;
      let h = this.byId.get(g.prompt_id);
      if (h === undefined) this.byId.set(g.prompt_id, (h = { last: [], recent: [], rollouts: 0, easyStreak: 0, hardStreak: 0 }));
      h.last = [...g.rewards];
      h.recent.push(...g.rewards);
      if (h.recent.length > this.keep) h.recent.splice(0, h.recent.length - this.keep);
      h.rollouts += g.rewards.length;
      const m = g.rewards.reduce((a, b) => a + b, 0) / g.rewards.length;
      h.easyStreak = m >= EASY_MEAN ? h.easyStreak + 1 : 0;
      h.hardStreak = m <= HARD_MEAN ? h.hardStreak + 1 : 0;
      if (g.tokens !== null) {
        for (const t of g.tokens) this.tokenSum += t;
        this.tokenCount += g.tokens.length;
      }
    }
  }
}

const group = fc.record({
  prompt_id: fc.constantFrom('a', 'b', 'c', 'd'),
  rewards: fc.array(fc.oneof(fc.constantFrom(0, 1, -0), fc.double({ min: 0, max: 1, noNaN: true })), { maxLength: 40 }),
  withTokens: fc.boolean(),
});

describe('History', () => {
  it('answers as a plain per-prompt record would (property)', () => {
    let ran = 0;
    fc.assert(
      fc.property(fc.constantFrom(0, 1, 4, 16), fc.array(fc.array(group, { maxLength: 6 }), { maxLength: 30 }), (keep, steps) => {
        const packed = new History(keep);
        const reference = new ReferenceHistory(keep);
        for (const step of steps) {
          const groups = step.map((g) => ({ prompt_id: g.prompt_id, step: 0, rewards: g.rewards, tokens: g.withTokens ? g.rewards.map((_, j) => 100 + j) : null }));
          packed.observe(groups);
          reference.observe(groups);
          for (const id of ['a', 'b', 'c', 'd', 'e']) expect(packed.get(id), `${id}, keep ${keep}`).toEqual(reference.get(id));
          expect(packed.meanTokens()).toBe(reference.meanTokens());
        }
        ran++;
      }),
      { numRuns: 300, seed: 15 },
    );
    expect(ran).toBe(300);
  });

  it('grows past its first 1,024 prompts', () => {
    const h = new History();
    for (let i = 0; i < 3000; i++) h.observe([{ prompt_id: `p${i}`, step: 0, rewards: [i % 2, 1], tokens: null }]);
    expect(h.get('p0')).toEqual({ last: [0, 1], recent: [0, 1], rollouts: 2, easyStreak: 0, hardStreak: 0 });
    expect(h.get('p2999')).toEqual({ last: [1, 1], recent: [1, 1], rollouts: 2, easyStreak: 1, hardStreak: 0 });
  });
});
