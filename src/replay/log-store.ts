import { PackedRun, type PackedGroups } from './packed-run.js';
import { isCorrect } from '../fields.js';

/** A typed array twice as long, holding `a`'s values (the rest `fill`). */
function doubled<T extends Int32Array | Uint8Array | Float64Array>(a: T, fill = 0): T {
  const b = new (a.constructor as new (n: number) => T)(Math.max(1024, 2 * a.length));
  b.set(a);
  if (fill !== 0) b.fill(fill, a.length);
  return b;
}

/**
 * The rollouts of a results or verl log, packed while the log is read: per rollout its reward
 * (a byte while every reward is 0 or 1, then a double) and its token count (absent until one
 * is seen, then an int32, -1 for none; a double past 2³¹ − 1); per run of consecutive rollouts
 * of one group, the group and the run's length (one run a group when a group's rollouts come
 * together, as they do in verl dumps and observe results). At the end the rollouts are ordered
 * by group (stably, a counting sort over the runs; nothing to move when the log was in step
 * and group order), so a group's rewards are one stretch of the arrays, in log order.
 * Memory: 1–13 bytes a rollout, ~70 a group while reading (~28 after), a prompt id once.
 */
export class RolloutStore {
  private rewards: Uint8Array | Float64Array = new Uint8Array(1 << 16);
  private tokens: Int32Array | Float64Array | undefined;
  private size = 0;
  private runGroup = new Int32Array(1 << 12);
  private runLength = new Int32Array(1 << 12);
  private runs = 0;
  /** Group index by step, then prompt index; per group its step, prompt (an index), size and successes. */
  private readonly index = new Map<number, Map<number, number>>();
  private readonly steps: number[] = [];
  private readonly promptOf: number[] = [];
  private readonly counts: number[] = [];
  private readonly correct: number[] = [];
  /** Each distinct prompt id once, and its index. */
  private readonly promptIndex = new Map<string, number>();
  private readonly promptNames: string[] = [];
  /** The group met last: a group's rollouts usually come together. */
  private lastStep = -1;
  private lastPrompt = '';
  private lastGroup = -1;

  /** Adds one rollout of `prompt` at `step`. O(1) amortized. */
  add(step: number, prompt: string, reward: number, tokens: number | undefined): void {
    if (step !== this.lastStep || prompt !== this.lastPrompt) {
      this.lastGroup = this.groupOf(step, prompt);
      this.lastStep = step;
      this.lastPrompt = prompt;
    }
    const g = this.lastGroup;
    if (this.runs > 0 && this.runGroup[this.runs - 1] === g) this.runLength[this.runs - 1]!++;
    else {
      if (this.runs === this.runGroup.length) {
        this.runGroup = doubled(this.runGroup);
        this.runLength = doubled(this.runLength);
      }
      this.runGroup[this.runs] = g;
      this.runLength[this.runs++] = 1;
    }
    const k = this.size++;
    if (k === this.rewards.length) {
      this.rewards = doubled(this.rewards);
      if (this.tokens !== undefined) this.tokens = doubled(this.tokens, -1);
    }
    if (this.rewards instanceof Uint8Array && reward !== 0 && reward !== 1) this.rewards = Float64Array.from(this.rewards);
    this.rewards[k] = reward;
    if (tokens !== undefined) {
      if (this.tokens === undefined) this.tokens = new Int32Array(this.rewards.length).fill(-1);
      if (this.tokens instanceof Int32Array && tokens > 0x7fffffff) this.tokens = Float64Array.from(this.tokens);
      this.tokens[k] = tokens;
    } else if (this.tokens !== undefined) this.tokens[k] = -1;
    this.counts[g]!++;
    if (isCorrect(reward)) this.correct[g]!++;
  }

  /** The group of (step, prompt), made on first sight. */
  private groupOf(step: number, prompt: string): number {
    let p = this.promptIndex.get(prompt);
    if (p === undefined) this.promptIndex.set(prompt, (p = this.promptNames.push(prompt) - 1));
    let byPrompt = this.index.get(step);
    if (byPrompt === undefined) this.index.set(step, (byPrompt = new Map()));
    let g = byPrompt.get(p);
    if (g === undefined) {
      g = this.steps.length;
      byPrompt.set(p, g);
      this.steps.push(step);
      this.promptOf.push(p);
      this.counts.push(0);
      this.correct.push(0);
    }
    return g;
  }

  /** The log as a PackedRun (see packed()). */
  run(): PackedRun {
    return new PackedRun(this.packed());
  }

  /**
   * The log's groups in step order (first seen first within a step, as a stable sort of the
   * first-seen order), their rollouts ordered by group. O(rollouts + groups log groups). The
   * store is empty after.
   */
  packed(): PackedGroups {
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
    for (let r = 0; r < this.runs; r++) start[rank[this.runGroup[r]!]! + 1]! += this.runLength[r]!;
    for (let i = 0; i < count; i++) start[i + 1]! += start[i]!;
    // In order already (groups met in step order, one run each, so run r is group r): nothing to move.
    const inOrder = sorted && this.runs === count;
    let rewards = this.rewards.subarray(0, this.size);
    let tokens = this.tokens?.subarray(0, this.size);
    if (!inOrder) {
      const from = { rewards, tokens };
      rewards = from.rewards instanceof Uint8Array ? new Uint8Array(this.size) : new Float64Array(this.size);
      tokens = from.tokens === undefined ? undefined : from.tokens instanceof Int32Array ? new Int32Array(this.size) : new Float64Array(this.size);
      const at = start.slice(0, count);
      for (let r = 0, k = 0; r < this.runs; r++) {
        const to = at[rank[this.runGroup[r]!]!]!;
        const length = this.runLength[r]!;
        rewards.set(from.rewards.subarray(k, k + length), to);
        if (tokens !== undefined) tokens.set(from.tokens!.subarray(k, k + length), to);
        at[rank[this.runGroup[r]!]!] = to + length;
        k += length;
      }
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
    this.rewards = new Uint8Array(0);
    this.tokens = undefined;
    this.runGroup = new Int32Array(0);
    this.runLength = new Int32Array(0);
    this.size = this.runs = 0;
    this.index.clear();
    this.promptIndex.clear();
    return groups;
  }
}
