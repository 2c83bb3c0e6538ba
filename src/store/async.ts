import type { ResultBatch, ResultSource } from '../io/results.js';
import type { DecayOptions } from '../posterior/decay.js';
import type { PromptState, StateSnapshot } from '../posterior/state.js';
import type { PromptMeta } from './meta.js';
import type { ObserveSummary, Store } from './types.js';

/**
 * The store operations as Promises, for backends that talk to a server (PostgreSQL) and for
 * the service, which must not block its event loop on them. Same contract as `Store`:
 * `apply` is atomic (all of a batch or none of it) and idempotent by rollout key. Every
 * implementation passes test/service-store.test.ts.
 */
export interface AsyncStore {
  /** Which backend, for logs and /healthz: 'sqlite' or 'postgres'. */
  readonly kind: string;
  /** What an operator should know about the state, found when it was opened (`serve` logs each). */
  readonly notes?: readonly string[];
  /** A consistent read view: every prompt, or `ids` and the pooled figures (Store.snapshot). */
  snapshot(ids?: readonly string[], groups?: readonly string[], hinted?: boolean): Promise<StateSnapshot>;
  get(id: string): Promise<PromptState | undefined>;
  lastStep(): Promise<number | null>;
  apply(batch: ResultBatch, decay: DecayOptions): Promise<ObserveSummary>;
  /** apply() for a batch read chunk by chunk, in bounded memory (store/claims.ts). */
  applySource(source: ResultSource, decay: DecayOptions): Promise<ObserveSummary>;
  /** Records prompts' group and hint: evidence untouched, idempotent (Store.recordPrompts). */
  recordPrompts(meta: readonly PromptMeta[]): Promise<void>;
  /** Prompts with evidence. */
  count(): Promise<number>;
  /** Store.mendPooled, where the store keeps pooled rows: `serve` runs it once at its start. */
  mendPooled?(): Promise<string | undefined>;
  /** Store.stopWaiting, where the store has it (PostgresStore: cancels the statements in flight). */
  stopWaiting?(reason: string): void | Promise<void>;
  close(): Promise<void>;
}

/**
 * A synchronous store seen through the async interface. The work still runs on the calling
 * thread (better-sqlite3 is synchronous), so calls are serialised by the event loop: that is
 * what makes SQLite's single-writer rule hold inside one service process.
 */
export function asyncStoreOf(store: Store, kind = 'sqlite'): AsyncStore {
  return {
    kind,
    get notes() {
      return store.notes;
    },
    snapshot: async (ids, groups, hinted) => store.snapshot(ids, groups, hinted),
    ...(store.mendPooled === undefined ? {} : { mendPooled: async () => store.mendPooled!() }),
    get: async (id) => store.get(id),
    lastStep: async () => store.lastStep(),
    apply: async (batch, decay) => (store.applyAsync === undefined ? store.apply(batch, decay) : store.applyAsync(batch, decay)),
    applySource: async (source, decay) => {
      if (store.applySource !== undefined) return store.applySource(source, decay);
      const results: ResultBatch['results'] = [];
      const keys: string[] = [];
      for (const chunk of source.chunks()) {
        chunk.results.forEach((r, k) => {
          results.push(r);
          keys.push(chunk.key(k));
        });
      }
      return store.apply({ results, keys, digest: source.digest }, decay);
    },
    recordPrompts: async (meta) => (store.recordPromptsAsync === undefined ? store.recordPrompts(meta) : store.recordPromptsAsync(meta)),
    count: async () => store.count(),
    stopWaiting: (reason) => store.stopWaiting?.(reason),
    close: async () => store.close(),
  };
}
