import { batchKey, type ResultChunk, type ResultTaker } from '../io/results.js';
import type { EvidenceAccumulator } from './accumulate.js';

/** settle()'s `claimed` when the store claimed every key the request asked for. */
export const ALL_CLAIMED = Symbol('all claimed');

/**
 * Which rollouts of a batch are new (observe's idempotency), decided chunk by chunk so that a
 * batch of any length is applied in bounded memory, inside the store's one transaction:
 *
 * - A rollout with a `rollout_id` is new when the store can claim its key in the `seen` table
 *   (`INSERT ... ON CONFLICT DO NOTHING RETURNING`); the first of equal keys in a batch takes
 *   it, later ones are duplicates.
 * - Rollouts without one have keys `auto:<digest>:<line>:<j>`, unique to their batch's text,
 *   so they were all applied with their batch or none were (a batch applies whole). One row,
 *   `auto:<digest>` (io/results.ts batchKey), stands for them all; a state written before
 *   this row existed has one row a rollout, so the batch also counts as applied when its first
 *   keyless rollout's own key is there.
 *
 * The row is claimed like a rollout id, when the batch's first keyless rollout is met, so two
 * writers of one batch wait for each other as they do on a rollout id. Aborted rollouts are
 * neither applied nor claimed. The store runs, per chunk: `request` → its lookups → `settle`.
 */
export class BatchClaims {
  /** Whether the batch's keyless rollouts are new: undefined until one is met. */
  private keylessNew: boolean | undefined;
  /** The last request asked for the batch key. */
  private asked = false;
  /** The taker left a result of the chunk being read in it: it leaves the rest too. */
  private holding = false;
  /** The last request's keys, distinct, when some repeated in its chunk; else undefined. */
  private repeats: string[] | undefined;

  /** `batch.digest` is asked for only when a keyless rollout is met (a file's is read then). */
  constructor(private readonly batch: { readonly digest: string }) {}

  /**
   * The lookups `settle(chunk)` needs: the keys to claim (the chunk's rollout ids and, at the
   * batch's first keyless rollout, its batch key; distinct and sorted, so concurrent writers
   * take row locks in one order) and `legacy`, a key whose presence says the batch was applied
   * before the batch key existed. The distinct keys come from sorting them all and dropping
   * equal neighbours: no set of them is built (with 10⁶ rollout ids, the set's inserts and
   * deletes cost about a tenth of an observe into SQLite).
   */
  request(chunk: ResultChunk): { claim: string[]; legacy?: string } {
    const claim: string[] = [];
    let legacy: string | undefined;
    const { results } = chunk;
    for (let k = 0; k < results.length; k++) {
      const r = results[k]!;
      if (r.finish_reason === 'abort') continue;
      if (r.rollout_id !== undefined) claim.push(chunk.key(k));
      else if (this.keylessNew === undefined && legacy === undefined) legacy = chunk.key(k);
    }
    this.asked = legacy !== undefined;
    if (this.asked) claim.push(batchKey(this.batch.digest));
    claim.sort();
    let distinct = 0;
    for (let i = 0; i < claim.length; i++) if (distinct === 0 || claim[i] !== claim[distinct - 1]) claim[distinct++] = claim[i]!;
    this.repeats = distinct < claim.length ? claim : undefined;
    claim.length = distinct;
    return { claim, ...(legacy === undefined ? {} : { legacy }) };
  }

  /**
   * Sorts the chunk's rollouts into `acc`: aborted, duplicate or applied. `claimed` holds the
   * keys the store claimed now (each is taken once; consumed), or is ALL_CLAIMED when the
   * store claimed every key of the request; `legacySeen` whether the request's `legacy` key
   * is stored (false when it asked none).
   */
  settle(chunk: ResultChunk, claimed: Set<string> | typeof ALL_CLAIMED, legacySeen: boolean, acc: EvidenceAccumulator): void {
    // A key that repeats in the chunk is taken by its first rollout: then count them off a set.
    const taken = claimed === ALL_CLAIMED ? (this.repeats === undefined ? undefined : new Set(this.repeats)) : claimed;
    this.repeats = undefined;
    if (this.asked) {
      this.keylessNew = (taken === undefined || taken.delete(batchKey(this.batch.digest))) && !legacySeen;
      this.asked = false;
    }
    const { results } = chunk;
    for (let k = 0; k < results.length; k++) {
      const r = results[k]!;
      if (r.finish_reason === 'abort') acc.abort();
      else if (r.rollout_id !== undefined ? taken === undefined || taken.delete(chunk.key(k)) : this.keylessNew === true) acc.add(r);
      else acc.duplicate();
    }
    this.holding = false;
  }

  /**
   * A ResultTaker (io/results.ts) settling into `acc` as they are read the rollouts that need
   * no claim: once the batch's keyless rollouts are known new or applied, each keyless one
   * read before any left in its chunk, as settle would have, in the same order (every one
   * taken precedes every one left). So a keyless batch's chunks after the first keep
   * nothing. For a store that settles each chunk before it reads the next.
   */
  taker(acc: EvidenceAccumulator): ResultTaker {
    return (r) => {
      if (this.holding || this.keylessNew === undefined || r.rollout_id !== undefined) {
        this.holding = true;
        return false;
      }
      if (r.finish_reason === 'abort') acc.abort();
      else if (this.keylessNew) acc.add(r);
      else acc.duplicate();
      return true;
    };
  }
}
