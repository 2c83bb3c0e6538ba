import type { Visit } from './visits.js';

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
  /** Group index by `${step}\u0000${prompt}`; per group its step, prompt, size and successes. */
  private readonly index = new Map<string, number>();
  private readonly steps: number[] = [];
  private readonly prompts: string[] = [];
  private readonly counts: number[] = [];
  private readonly correct: number[] = [];
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
        this.prompts.push(prompt);
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

  /** The groups as visits, in first-seen order, their rollouts ordered by group. O(rollouts). */
  visits(): Visit[] {
    const groups = this.steps.length;
    const start = new Int32Array(groups + 1);
    for (let k = 0; k < this.size; k++) start[this.groupOf[k]! + 1]!++;
    for (let g = 0; g < groups; g++) start[g + 1]! += start[g]!;
    const at = start.slice(0, groups);
    const rewards = this.rewards instanceof Uint8Array ? new Uint8Array(this.size) : new Float64Array(this.size);
    const tokens = this.tokens === undefined ? undefined : this.tokens instanceof Int32Array ? new Int32Array(this.size) : new Float64Array(this.size);
    for (let k = 0; k < this.size; k++) {
      const to = at[this.groupOf[k]!]!++;
      rewards[to] = this.rewards[k]!;
      if (tokens !== undefined) tokens[to] = this.tokens![k]!;
    }
    this.groupOf = new Int32Array(0);
    this.index.clear();
    const packed = { rewards, tokens };
    const out: Visit[] = new Array(groups);
    for (let g = 0; g < groups; g++) out[g] = new PackedVisit(this.steps[g]!, this.prompts[g]!, this.counts[g]!, this.correct[g]!, packed, start[g]!);
    return out;
  }
}

/**
 * A visit whose rollouts live in the store's arrays: `rewards` and `tokens` are made as
 * arrays when read (a drawer reads them once), so a million visits hold no array each.
 */
class PackedVisit implements Visit {
  // Not own properties: a visit compares and prints as {step, prompt_id, n, correct}.
  readonly #packed: { readonly rewards: Uint8Array | Float64Array; readonly tokens: Int32Array | Float64Array | undefined };
  readonly #offset: number;

  constructor(
    readonly step: number,
    readonly prompt_id: string,
    readonly n: number,
    readonly correct: number,
    packed: { readonly rewards: Uint8Array | Float64Array; readonly tokens: Int32Array | Float64Array | undefined },
    offset: number,
  ) {
    this.#packed = packed;
    this.#offset = offset;
  }

  get rewards(): number[] {
    return Array.from(this.#packed.rewards.subarray(this.#offset, this.#offset + this.n));
  }

  get tokens(): (number | undefined)[] {
    const t = this.#packed.tokens;
    const out: (number | undefined)[] = new Array(this.n);
    for (let j = 0; j < this.n; j++) {
      const v = t === undefined ? -1 : t[this.#offset + j]!;
      out[j] = v < 0 ? undefined : v;
    }
    return out;
  }
}
