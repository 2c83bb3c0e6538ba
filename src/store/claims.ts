import { badInput, quote } from '../errors.js';
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
    if (this.repeats !== undefined) checkRepeatedIds(chunk);
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

/**
 * A rollout_id repeated within a chunk on another prompt is an error: a producer numbering
 * each group's rollouts 0..n−1 gave every prompt the same ids, and observe kept the first
 * prompt's rollouts and counted every other prompt's as duplicates (396 of 400 dropped, exit 0).
 * The same id on the same prompt stays a duplicate (a line written twice). Runs only when a
 * chunk repeats a key.
 */
function checkRepeatedIds(chunk: ResultChunk): void {
  const first = new Map<string, number>();
  const { results } = chunk;
  for (let k = 0; k < results.length; k++) {
    const id = results[k]!.rollout_id;
    if (id === undefined || results[k]!.finish_reason === 'abort') continue;
    const j = first.get(id);
    if (j === undefined) {
      first.set(id, k);
      continue;
    }
    if (results[j]!.prompt_id === results[k]!.prompt_id) continue;
    const at = (i: number) => (chunk.where === undefined ? '' : ` (${chunk.where(i)})`);
    throw badInput(chunk.where?.(k) ?? 'results', `"rollout_id" ${quote(id)} of prompt ${quote(results[k]!.prompt_id)} is already the id of a rollout of prompt ${quote(results[j]!.prompt_id)}${at(j)}: a rollout id names one rollout, so observe would count this one as that one's duplicate; make ids unique across prompts, e.g. "<step>/<prompt_id>#<j>"`);
  }
}
