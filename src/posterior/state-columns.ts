import { addState, emptyGroupStats, stateOfValues, type GroupStats, type PooledFields, type PromptState, type RunningSums, type StateSnapshot, type Sums } from './state.js';
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
  /** The rows' fields, ROW_BYTES a row (StateColumns' layout). */
  readonly rows: Float64Array;
  readonly sums: RowSums;
}

/**
 * The pooled figures of the rows added so far, summed in row order as they are added
 * (posterior/state.ts addState), each group's by its place in the group names: what
 * snapshot() gives without reading every row again.
 */
interface RowSums extends RunningSums {
  readonly groups: Sums[];
}

/**
 * A row's bytes: its 7 float fields (8 bytes each), then its 5 integer fields (4 bytes each),
 * 76 bytes padded to 80. A row's fields lie side by side, in one or two cache lines: a plan
 * looks its candidates up in the state's order of rows, which is seldom theirs, and a row read
 * from 12 arrays of their own took 12 cache misses (10⁶ candidates in a shuffled order: 1.1 s
 * against 0.25 s in the rows' order, here).
 */
const ROW_BYTES = 80;
/** Float64 and Int32 places a row. */
const F = ROW_BYTES / 8;
const I = ROW_BYTES / 4;
/** The float fields' places in a row. */
const SUCCESSES = 0;
const FAILURES = 1;
const REWARD_SUM = 2;
const CORRECT_TOKENS = 3;
const WRONG_TOKENS = 4;
/** NaN: null. */
const PRIOR_PASS_RATE = 5;
const PRIOR_SAMPLES = 6;
/** The integer fields' places in a row (after the 7 floats' 14 Int32 places). */
const GROUP = 14;
const LAST_STEP = 15;
const ROLLOUTS = 16;
const CORRECT_COUNT = 17;
const WRONG_COUNT = 18;
/** eachOf's one state object: a PromptState whose hint fields are always there (undefined for none), so its shape never changes. */
type RowView = { -readonly [K in Exclude<keyof PromptState, 'priorPassRate' | 'priorSamples'>]: PromptState[K] } & {
  priorPassRate: number | undefined;
  priorSamples: number | undefined;
};

const emptyView = (): RowView => ({
  id: '', group: null, successes: 0, failures: 0, lastStep: 0, rollouts: 0, rewardSum: 0, correctCount: 0, correctTokens: 0,
  wrongCount: 0, wrongTokens: 0, priorPassRate: undefined, priorSamples: undefined,
});

/** Ids looked up at a time by eachOf (findMany's block): 512 ids' slots, ends, units and rows stay in the caches. */
const LOOKUP_BLOCK = 512;

/**
 * Prompt states held as rows of typed fields, a row per distinct id in the order added, the ids
 * packed in a PackedIdIndex, no object or string per prompt. A state object is made when
 * asked for (`state(k)`), the same fields in the same order as a row read into a PromptState
 * (store/sqlite-rows.ts), so a plan that looks up each candidate once makes short-lived objects
 * only. Memory: 80 bytes a row and 2 an id's UTF-16 unit.
 */
export class StateColumns {
  readonly index: PackedIdIndex;
  private readonly groupNames: string[] = [];
  private readonly groupAt = new Map<string, number>();
  /** The rows: float fields at F·k + field, integer fields (group: a position in `groupNames`, or −1 for none) at I·k + field. */
  private readonly f: Float64Array;
  private readonly i: Int32Array;
  /** state()'s row read, copied into a new state at once. */
  private readonly scratch = emptyView();
  /** What eachOf's first pass over a block's rows read, kept so that a compiler cannot drop its loads. */
  private read = -0;
  /** The rows' sums so far (add()), and the row being added as addState reads one. */
  private readonly sums: RowSums;
  private readonly adding: { -readonly [K in keyof PooledFields | 'rollouts' | 'lastStep']: number } = {
    successes: 0, failures: 0, correctCount: 0, correctTokens: 0, wrongCount: 0, wrongTokens: 0, rollouts: 0, lastStep: 0,
  };

  /** Columns for up to `capacity` rows; `parts`: those of columns made elsewhere (`parts()`). */
  constructor(readonly capacity: number, parts?: StateColumnParts) {
    this.index = new PackedIdIndex(capacity, parts?.index);
    this.f = parts?.rows ?? new Float64Array(F * capacity);
    this.i = new Int32Array(this.f.buffer, this.f.byteOffset, I * capacity);
    for (const name of parts?.groupNames ?? []) this.groupAt.set(name, this.groupNames.push(name) - 1);
    this.sums = parts?.sums ?? { all: { ...emptyGroupStats }, groups: [], latest: null };
  }

  /**
   * The columns as parts, for `new StateColumns(capacity, parts)` in another thread (their
   * buffers may be transferred); `trim`: PackedIdIndex.parts's.
   */
  parts(trim = true): StateColumnParts {
    return { capacity: this.capacity, index: this.index.parts(trim), groupNames: this.groupNames, rows: this.f, sums: this.sums };
  }

  /** The parts' buffers, for postMessage's transfer list. */
  static buffers(parts: StateColumnParts): ArrayBuffer[] {
    const { index } = parts;
    return [parts.rows, index.units, index.ends, index.slots].map((a) => a.buffer as ArrayBuffer);
  }

  get size(): number {
    return this.index.size;
  }

  /**
   * Adds a row (the prompts table's columns, store/sqlite-rows.ts ROW_COLUMNS) and returns true;
   * returns false, adding nothing, for a row the columns cannot keep exactly: a value of
   * another type than the table's, an integer column beyond 32 bits, or more rows than
   * `capacity`. The caller then reads the state the careful way. The ids are indexed by
   * seal(), once every row is added (a repeated id shows there).
   */
  add(
    id: unknown, group: unknown, successes: unknown, failures: unknown, lastStep: unknown, rollouts: unknown, rewardSum: unknown,
    correctCount: unknown, correctTokens: unknown, wrongCount: unknown, wrongTokens: unknown, priorPassRate: unknown, priorSamples: unknown,
  ): boolean {
    const k = this.index.size;
    if (k === this.capacity || typeof id !== 'string' || (group !== null && typeof group !== 'string')) return false;
    if (typeof successes !== 'number' || typeof failures !== 'number' || typeof rewardSum !== 'number' || typeof correctTokens !== 'number' || typeof wrongTokens !== 'number') return false;
    if (!isInt32(lastStep) || !isInt32(rollouts) || !isInt32(correctCount) || !isInt32(wrongCount) || !isNumberOrNull(priorPassRate) || !isNumberOrNull(priorSamples)) return false;
    this.index.push(id);
    const { f, i } = this;
    const a = F * k;
    const b = I * k;
    f[a + SUCCESSES] = successes;
    f[a + FAILURES] = failures;
    f[a + REWARD_SUM] = rewardSum;
    f[a + CORRECT_TOKENS] = correctTokens;
    f[a + WRONG_TOKENS] = wrongTokens;
    f[a + PRIOR_PASS_RATE] = priorPassRate ?? NaN;
    f[a + PRIOR_SAMPLES] = priorSamples ?? NaN;
    i[b + LAST_STEP] = lastStep;
    i[b + ROLLOUTS] = rollouts;
    i[b + CORRECT_COUNT] = correctCount;
    i[b + WRONG_COUNT] = wrongCount;
    let g = -1;
    if (group !== null) {
      g = this.groupAt.get(group) ?? -1;
      if (g < 0) {
        this.groupAt.set(group, (g = this.groupNames.push(group) - 1));
        this.sums.groups.push({ ...emptyGroupStats });
      }
    }
    i[b + GROUP] = g;
    // The sums as snapshot() reads them: the values just stored (exactly the ones given), in row order.
    const row = this.adding;
    row.successes = successes;
    row.failures = failures;
    row.correctCount = correctCount;
    row.correctTokens = correctTokens;
    row.wrongCount = wrongCount;
    row.wrongTokens = wrongTokens;
    row.rollouts = rollouts;
    row.lastStep = lastStep;
    addState(this.sums, row, g >= 0 ? this.sums.groups[g] : undefined);
    return true;
  }

  /** Indexes the rows' ids, once every row is added; false when an id repeats (the columns are then unusable). */
  seal(): boolean {
    return this.index.index();
  }

  /** Row k's group, or null. */
  groupOf(k: number): string | null {
    const g = this.i[I * k + GROUP]!;
    return g < 0 ? null : this.groupNames[g]!;
  }

  /**
   * Row k as a PromptState (a new object each call), made as every store's reader makes one
   * (stateOfValues); `id`, when the caller has it, must be row k's.
   */
  state(k: number, id = this.index.idAt(k)): PromptState {
    const v = this.view(this.scratch, k, id);
    return stateOfValues(v.id, v.group, v.successes, v.failures, v.lastStep, v.rollouts, v.rewardSum, v.correctCount, v.correctTokens,
      v.wrongCount, v.wrongTokens, v.priorPassRate ?? null, v.priorSamples ?? null);
  }

  /** `view` set to row k's state (the hint's fields undefined when null); returns it. The one read of a row's fields. */
  private view(view: RowView, k: number, id: string): PromptState {
    const { f, i } = this;
    const a = F * k;
    const b = I * k;
    const rate = f[a + PRIOR_PASS_RATE]!;
    const samples = f[a + PRIOR_SAMPLES]!;
    view.id = id;
    view.group = this.groupOf(k);
    view.successes = f[a + SUCCESSES]!;
    view.failures = f[a + FAILURES]!;
    view.lastStep = i[b + LAST_STEP]!;
    view.rollouts = i[b + ROLLOUTS]!;
    view.rewardSum = f[a + REWARD_SUM]!;
    view.correctCount = i[b + CORRECT_COUNT]!;
    view.correctTokens = f[a + CORRECT_TOKENS]!;
    view.wrongCount = i[b + WRONG_COUNT]!;
    view.wrongTokens = f[a + WRONG_TOKENS]!;
    view.priorPassRate = rate === rate ? rate : undefined;
    view.priorSamples = samples === samples ? samples : undefined;
    return view;
  }

  /**
   * StateSnapshot.eachOf: the ids looked up a block at a time (PackedIdIndex.findMany), then
   * the block's rows read once before their states are made, so that their cache misses too
   * overlap instead of following one another. O(items) expected.
   */
  private eachOf(items: readonly { readonly id: string }[], hashes: Uint32Array, each: (i: number, state: PromptState | undefined) => void): void {
    const rows = new Int32Array(Math.min(LOOKUP_BLOCK, items.length));
    // One state object for the call, its fields set anew for each prompt (StateSnapshot.eachOf:
    // valid during `each` only): no object a prompt (a plan of 10⁶: 167 MB of them).
    const view = emptyView();
    const { f, i: ints } = this;
    for (let from = 0; from < items.length; from += LOOKUP_BLOCK) {
      const to = Math.min(items.length, from + LOOKUP_BLOCK);
      this.index.findMany(items, hashes, from, to, rows);
      let read = 0;
      for (let j = 0; j < to - from; j++) {
        const k = rows[j]!;
        // A row's first and last bytes: its 80 bytes span two cache lines (or three).
        if (k >= 0) read += f[F * k]! + ints[I * k + WRONG_COUNT]!;
      }
      this.read = read;
      for (let i = from; i < to; i++) {
        const k = rows[i - from]!;
        each(i, k < 0 ? undefined : this.view(view, k, items[i]!.id));
      }
    }
  }

  /**
   * The snapshot snapshotOf (posterior/state.ts) gives for `[state(0), state(1), …]`: the same
   * pooled figures, summed in row order, and states made on lookup. O(groups) to build.
   */
  snapshot(lastStep?: number | null): StateSnapshot {
    const n = this.size;
    const { f } = this;
    // The pooled figures were summed row by row as the rows were added (add()), as snapshotOf
    // sums them; copies, so that no caller's edit reaches the next snapshot.
    const groups: GroupStats[] = this.sums.groups.map((g) => ({ ...g }));
    const all: GroupStats = { ...this.sums.all };
    const latest = this.sums.latest;
    let hinted: PromptState[] | undefined;
    let states: PromptState[] | undefined;
    return {
      lastStep: lastStep ?? latest,
      get: (id, hash) => {
        const k = this.index.find(id, hash);
        return k < 0 ? undefined : this.state(k, id);
      },
      eachOf: (items, hashes, each) => this.eachOf(items, hashes, each),
      group: (name) => {
        const g = this.groupAt.get(name);
        return g === undefined ? undefined : groups[g];
      },
      all,
      hinted: () => {
        if (hinted === undefined) {
          hinted = [];
          for (let k = 0; k < n; k++) {
            const rate = f[F * k + PRIOR_PASS_RATE]!;
            if (rate === rate && f[F * k + SUCCESSES]! + f[F * k + FAILURES]! > 0) hinted.push(this.state(k));
          }
        }
        return hinted;
      },
      states: () => (states ??= Array.from({ length: n }, (_, k) => this.state(k))),
    };
  }
}
