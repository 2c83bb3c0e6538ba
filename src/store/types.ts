import type { ResultBatch, ResultSource } from '../io/results.js';
import type { DecayOptions } from '../posterior/decay.js';
import type { PromptState, StateSnapshot } from '../posterior/state.js';
import type { PromptMeta } from './meta.js';

/** What one observe did. */
export interface ObserveSummary {
  /** Rollouts that updated a posterior. */
  applied: number;
  /** Rollouts skipped because their rollout_id (or the same batch) was already applied. */
  duplicates: number;
  /** Aborted rollouts: not applied, not marked seen (a resumed rollout may still count). */
  aborted: number;
  /** Distinct prompts updated. */
  prompts: number;
  /** Latest step in the state after the batch, or null. */
  last_step: number | null;
  /**
   * Present only when there is something to say: results far behind the state's last step
   * (posterior/decay.ts behindWarning, most often a new run on an old run's state).
   */
  warnings?: string[];
}

/** Where posteriors live. Every implementation passes test/store.test.ts. */
export interface Store {
  /** What an operator should know about the state (`serve` logs each, `inspect` and `backup` print them); optional. */
  readonly notes?: readonly string[];
  /**
   * Rebuilds the pooled rows when they no longer sum the prompts (store/pooled.ts samePooled),
   * returning a note saying so; undefined when they did. Where a store keeps pooled rows.
   */
  mendPooled?(): string | undefined;
  /**
   * A consistent read view. Without `ids`, every prompt; with `ids`, those prompts and the
   * pooled figures of every prompt and of `groups` and the prompts' groups (store/pooled.ts):
   * a read that costs what the ids cost, not what the state holds; and every observed hinted
   * prompt when `hinted` is set or a prompt read carries a hint (the hint calibration's data).
   */
  snapshot(ids?: readonly string[], groups?: readonly string[], hinted?: boolean): StateSnapshot;
  /**
   * At least as many as the prompts the state holds, read at little cost (optional): what
   * Allocator.plan weighs a plan's candidates against to read only theirs (allocator.ts).
   */
  promptsAtMost?(): number;
  get(id: string): PromptState | undefined;
  lastStep(): number | null;
  /** Applies a batch atomically and idempotently: all of it or none of it. */
  apply(batch: ResultBatch, decay: DecayOptions): ObserveSummary;
  /**
   * apply() for a batch read chunk by chunk (a results file of any size): the same one
   * transaction, in bounded memory (optional; the stores here have it).
   */
  applySource?(source: ResultSource, decay: DecayOptions): ObserveSummary;
  /** apply() without blocking the thread while it waits for another writer (optional). */
  applyAsync?(batch: ResultBatch, decay: DecayOptions): Promise<ObserveSummary>;
  /**
   * Records prompts' group and offline hint (store/meta.ts `withMeta`): one transaction that
   * never touches evidence; recording the same metadata again changes nothing.
   */
  recordPrompts(meta: readonly PromptMeta[]): void;
  /** recordPrompts() without blocking the thread while it waits for another writer (optional). */
  recordPromptsAsync?(meta: readonly PromptMeta[]): Promise<void>;
  /** Throws the error a write would give when this store cannot be written (a state opened read-only); optional. */
  requireWritable?(): void;
  /** Number of prompts with evidence (prompts only planned are not counted). */
  count(): number;
  /** Ends waits for another process's write lock with STATE_ERROR, nothing applied (SqliteStore.stopWaiting); optional. */
  stopWaiting?(reason: string): void | Promise<void>;
  close(): void;
}
