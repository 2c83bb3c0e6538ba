import { addToGroupStats, emptyGroupStats, type GroupStats, type PromptState, type StateSnapshot } from './state.js';
import { PackedIdIndex, type PackedIdParts } from './packed-ids.js';

/** Integers that an Int32Array keeps as they are (not −0). */
const isInt32 = (v: unknown): v is number => typeof v === 'number' && (v | 0) === v && !(v === 0 && 1 / v < 0);

/** A number, or null (kept as NaN, which no state holds: SQLite stores NaN as NULL). */
const isNumberOrNull = (v: unknown): v is number | null => v === null || (typeof v === 'number' && v === v);

/** The columns of a StateColumns, typed arrays and the group names: what crosses a thread (store/scan-thread.ts). */
export interface StateColumnParts {
  readonly capacity: number;
  readonly index: PackedIdParts;
  readonly groupNames: readonly string[];
  readonly floats: readonly Float64Array[];
  readonly ints: readonly Int32Array[];
}

/**
 * Prompt states held as columns, a row per distinct id in the order added: typed arrays, the
 * ids packed in a PackedIdIndex, no object or string per prompt. A state object is made when
 * asked for (`state(k)`), the same fields in the same order as a row read into a PromptState
 * (store/sqlite-rows.ts), so a plan that looks up each candidate once makes short-lived objects
 * only. Memory: about 76 bytes a row and 2 an id's UTF-16 unit.
 */
export class StateColumns {
  readonly index: PackedIdIndex;
  /** Group of each row: a position in `groupNames`, or −1 for none. */
  private readonly group: Int32Array;
  private readonly groupNames: string[] = [];
  private readonly groupAt = new Map<string, number>();
  private readonly successes: Float64Array;
  private readonly failures: Float64Array;
  private readonly rewardSum: Float64Array;
  private readonly correctTokens: Float64Array;
  private readonly wrongTokens: Float64Array;
  /** NaN: null. */
  private readonly priorPassRate: Float64Array;
  private readonly priorSamples: Float64Array;
  private readonly lastStep: Int32Array;
  private readonly rollouts: Int32Array;
  private readonly correctCount: Int32Array;
  private readonly wrongCount: Int32Array;

  /** Columns for up to `capacity` rows; `parts`: those of columns made elsewhere (`parts()`). */
  constructor(readonly capacity: number, parts?: StateColumnParts) {
    this.index = new PackedIdIndex(capacity, parts?.index);
    const floats = parts?.floats ?? Array.from({ length: 7 }, () => new Float64Array(capacity));
    const ints = parts?.ints ?? Array.from({ length: 5 }, () => new Int32Array(capacity));
    const float = (k: number) => floats[k]!;
    const int = (k: number) => ints[k]!;
    this.successes = float(0);
    this.failures = float(1);
    this.rewardSum = float(2);
    this.correctTokens = float(3);
    this.wrongTokens = float(4);
    this.priorPassRate = float(5);
    this.priorSamples = float(6);
    this.group = int(0);
    this.lastStep = int(1);
    this.rollouts = int(2);
    this.correctCount = int(3);
    this.wrongCount = int(4);
    for (const name of parts?.groupNames ?? []) this.groupAt.set(name, this.groupNames.push(name) - 1);
  }

  /** The columns as parts, for `new StateColumns(capacity, parts)` in another thread (their buffers may be transferred). */
  parts(): StateColumnParts {
    return {
      capacity: this.capacity,
      index: this.index.parts(),
      groupNames: this.groupNames,
      floats: [this.successes, this.failures, this.rewardSum, this.correctTokens, this.wrongTokens, this.priorPassRate, this.priorSamples],
      ints: [this.group, this.lastStep, this.rollouts, this.correctCount, this.wrongCount],
    };
  }

  /** The parts' buffers, for postMessage's transfer list. */
  static buffers(parts: StateColumnParts): ArrayBuffer[] {
    const { index } = parts;
    return [...parts.floats, ...parts.ints, index.units, index.ends, index.hashes, index.slots].map((a) => a.buffer as ArrayBuffer);
  }

  get size(): number {
    return this.index.size;
  }

  /**
   * Adds a row (the prompts table's columns, store/sqlite-rows.ts ROW_COLUMNS) and returns true;
   * returns false, adding nothing, for a row the columns cannot keep exactly: a repeated id, a
   * value of another type than the table's, an integer column beyond 32 bits, or more rows
   * than `capacity`. The caller then reads the state the careful way.
   */
  add(
    id: unknown, group: unknown, successes: unknown, failures: unknown, lastStep: unknown, rollouts: unknown, rewardSum: unknown,
    correctCount: unknown, correctTokens: unknown, wrongCount: unknown, wrongTokens: unknown, priorPassRate: unknown, priorSamples: unknown,
  ): boolean {
    const k = this.index.size;
    if (k === this.capacity || typeof id !== 'string' || (group !== null && typeof group !== 'string')) return false;
    if (typeof successes !== 'number' || typeof failures !== 'number' || typeof rewardSum !== 'number' || typeof correctTokens !== 'number' || typeof wrongTokens !== 'number') return false;
    if (!isInt32(lastStep) || !isInt32(rollouts) || !isInt32(correctCount) || !isInt32(wrongCount) || !isNumberOrNull(priorPassRate) || !isNumberOrNull(priorSamples)) return false;
    if (this.index.add(id) !== k) return false;
    this.successes[k] = successes;
    this.failures[k] = failures;
    this.rewardSum[k] = rewardSum;
    this.correctTokens[k] = correctTokens;
    this.wrongTokens[k] = wrongTokens;
    this.priorPassRate[k] = priorPassRate ?? NaN;
    this.priorSamples[k] = priorSamples ?? NaN;
    this.lastStep[k] = lastStep;
    this.rollouts[k] = rollouts;
    this.correctCount[k] = correctCount;
    this.wrongCount[k] = wrongCount;
    let g = -1;
    if (group !== null) {
      g = this.groupAt.get(group) ?? -1;
      if (g < 0) this.groupAt.set(group, (g = this.groupNames.push(group) - 1));
    }
    this.group[k] = g;
    return true;
  }

  /** Row k's group, or null. */
  groupOf(k: number): string | null {
    const g = this.group[k]!;
    return g < 0 ? null : this.groupNames[g]!;
  }

  /** Row k as a PromptState (a new object each call); `id`, when the caller has it, must be row k's. */
  state(k: number, id = this.index.idAt(k)): PromptState {
    const rate = this.priorPassRate[k]!;
    const samples = this.priorSamples[k]!;
    return {
      id,
      group: this.groupOf(k),
      successes: this.successes[k]!,
      failures: this.failures[k]!,
      lastStep: this.lastStep[k]!,
      rollouts: this.rollouts[k]!,
      rewardSum: this.rewardSum[k]!,
      correctCount: this.correctCount[k]!,
      correctTokens: this.correctTokens[k]!,
      wrongCount: this.wrongCount[k]!,
      wrongTokens: this.wrongTokens[k]!,
      ...(rate !== rate ? {} : { priorPassRate: rate }),
      ...(samples !== samples ? {} : { priorSamples: samples }),
    };
  }

  /**
   * The snapshot snapshotOf (posterior/state.ts) gives for `[state(0), state(1), …]`: the same
   * pooled figures, summed in row order, and states made on lookup. O(rows) to build.
   */
  snapshot(lastStep?: number | null): StateSnapshot {
    const n = this.size;
    const { successes, failures, correctCount, correctTokens, wrongCount, wrongTokens, lastStep: steps, rollouts, priorPassRate } = this;
    // The fields addToGroupStats reads, one object reused over the rows.
    const row = { successes: 0, failures: 0, correctCount: 0, correctTokens: 0, wrongCount: 0, wrongTokens: 0 };
    const groups: GroupStats[] = this.groupNames.map(() => emptyGroupStats);
    let all = emptyGroupStats;
    let latest: number | null = null;
    for (let k = 0; k < n; k++) {
      row.successes = successes[k]!;
      row.failures = failures[k]!;
      row.correctCount = correctCount[k]!;
      row.correctTokens = correctTokens[k]!;
      row.wrongCount = wrongCount[k]!;
      row.wrongTokens = wrongTokens[k]!;
      all = addToGroupStats(all, row);
      const g = this.group[k]!;
      if (g >= 0) groups[g] = addToGroupStats(groups[g]!, row);
      if (rollouts[k]! > 0 && (latest === null || steps[k]! > latest)) latest = steps[k]!;
    }
    let hinted: PromptState[] | undefined;
    let states: PromptState[] | undefined;
    return {
      lastStep: lastStep ?? latest,
      get: (id, hash) => {
        const k = this.index.find(id, hash);
        return k < 0 ? undefined : this.state(k, id);
      },
      group: (name) => {
        const g = this.groupAt.get(name);
        return g === undefined ? undefined : groups[g];
      },
      all,
      hinted: () => {
        if (hinted === undefined) {
          hinted = [];
          for (let k = 0; k < n; k++) if (priorPassRate[k] === priorPassRate[k] && successes[k]! + failures[k]! > 0) hinted.push(this.state(k));
        }
        return hinted;
      },
      states: () => (states ??= Array.from({ length: n }, (_, k) => this.state(k))),
    };
  }
}
