import { PackedRun } from './packed-run.js';

/**
 * The rollouts of a results or verl log, packed while the log is read: per rollout its
 * group's index (while loading), its reward (a byte while every reward is 0 or 1, then a
 * double) and its token count (absent until one is seen, then an int32, -1 for none; a double
 * past 2³¹ − 1). At the end the rollouts are ordered by group (stably, a counting sort), so a
 * group's rewards are one run of the arrays, in log order. Memory: ~1–13 bytes a rollout and
 * ~100 a group, against ~100 a rollout for an array per group.
 */
export class RolloutStore {
  private groupOf = new Int32Array(1 << 16);
  private rewards: Uint8Array | Float64Array = new Uint8Array(1 << 16);
  private tokens: Int32Array | Float64Array | undefined;
  private size = 0;
  /** Group index by `${step}\u0000${prompt}`; per group its step, prompt (an index), size and successes. */
  private readonly index = new Map<string, number>();
  private readonly steps: number[] = [];
  private readonly promptOf: number[] = [];
  private readonly counts: number[] = [];
  private readonly correct: number[] = [];
  /** Each distinct prompt id once, and its index. */
  private readonly promptIndex = new Map<string, number>();
  private readonly promptNames: string[] = [];
  /** The group met last: a group's rollouts usually come together. */
  private lastKey = '';
  private lastStep = -1;
  private lastPrompt = '';
  private lastGroup = -1;

  /** Adds one rollout of `prompt` at `step`. O(1) amortized. */
  add(step: number, prompt: string, reward: number, tokens: number | undefined): void {
    let g = this.lastGroup;
    if (step !== this.lastStep || prompt !== this.lastPrompt) {
      this.lastKey = `${step}\u0000${prompt}`;
      let found = this.index.get(this.lastKey);
      if (found === undefined) {
        found = this.steps.length;
        this.index.set(this.lastKey, found);
        this.steps.push(step);
        let p = this.promptIndex.get(prompt);
        if (p === undefined) this.promptIndex.set(prompt, (p = this.promptNames.push(prompt) - 1));
        this.promptOf.push(p);
        this.counts.push(0);
        this.correct.push(0);
      }
      g = this.lastGroup = found;
      this.lastStep = step;
      this.lastPrompt = prompt;
    }
    const k = this.size++;
    if (k === this.groupOf.length) this.grow();
    this.groupOf[k] = g;
    if (this.rewards instanceof Uint8Array && reward !== 0 && reward !== 1) this.rewards = Float64Array.from(this.rewards);
    this.rewards[k] = reward;
    if (tokens !== undefined) {
      if (this.tokens === undefined) this.tokens = new Int32Array(this.groupOf.length).fill(-1);
      if (this.tokens instanceof Int32Array && tokens > 0x7fffffff) this.tokens = Float64Array.from(this.tokens);
      this.tokens[k] = tokens;
    } else if (this.tokens !== undefined) this.tokens[k] = -1;
    this.counts[g]!++;
    if (reward >= 0.5) this.correct[g]!++;
  }

  private grow(): void {
    const more = <T extends Int32Array | Uint8Array | Float64Array>(a: T): T => {
      const b = new (a.constructor as new (n: number) => T)(2 * a.length);
      b.set(a);
      return b;
    };
    this.groupOf = more(this.groupOf);
    this.rewards = more(this.rewards);
    if (this.tokens !== undefined) {
      const old = this.tokens.length;
      this.tokens = more(this.tokens);
      this.tokens.fill(-1, old);
    }
  }

  /**
   * The log as a PackedRun: groups in step order (first seen first within a step, as a stable
   * sort of the first-seen order), their rollouts ordered by group (a counting sort, so a
   * group's rollouts stay in log order). O(rollouts + groups log groups). The store is empty after.
   */
  run(): PackedRun {
    const count = this.steps.length;
    const steps = Float64Array.from(this.steps);
    const order = new Int32Array(count);
    for (let g = 0; g < count; g++) order[g] = g;
    let sorted = true;
    for (let g = 1; g < count && sorted; g++) sorted = steps[g - 1]! <= steps[g]!;
    if (!sorted) order.sort((a, b) => steps[a]! - steps[b]! || a - b);
    const rank = new Int32Array(count);
    for (let i = 0; i < count; i++) rank[order[i]!] = i;
    const start = new Float64Array(count + 1);
    for (let k = 0; k < this.size; k++) start[rank[this.groupOf[k]!]! + 1]!++;
    for (let i = 0; i < count; i++) start[i + 1]! += start[i]!;
    const at = start.slice(0, count);
    const rewards = this.rewards instanceof Uint8Array ? new Uint8Array(this.size) : new Float64Array(this.size);
    const tokens = this.tokens === undefined ? undefined : this.tokens instanceof Int32Array ? new Int32Array(this.size) : new Float64Array(this.size);
    for (let k = 0; k < this.size; k++) {
      const to = at[rank[this.groupOf[k]!]!]!++;
      rewards[to] = this.rewards[k]!;
      if (tokens !== undefined) tokens[to] = this.tokens![k]!;
    }
    const pick = <T extends Int32Array | Float64Array>(into: T, from: ArrayLike<number>): T => {
      for (let i = 0; i < count; i++) into[i] = from[order[i]!]!;
      return into;
    };
    const groups = {
      step: pick(new Float64Array(count), steps),
      prompt: pick(new Int32Array(count), this.promptOf),
      n: pick(new Int32Array(count), this.counts),
      correct: pick(new Int32Array(count), this.correct),
      start: start.subarray(0, count),
      prompts: this.promptNames,
      rollouts: { rewards, tokens },
    };
    this.groupOf = new Int32Array(0);
    this.rewards = new Uint8Array(0);
    this.tokens = undefined;
    this.size = 0;
    this.index.clear();
    this.promptIndex.clear();
    return new PackedRun(groups);
  }
}
