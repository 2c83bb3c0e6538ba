import { quote } from '../errors.js';
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

  /**
   * How many of the batch's rollouts without a rollout_id were taken for a batch observed
   * before (the same batch, or one with the same content: keyless rollouts are known by it):
   * each counts as a duplicate, and the summary warns (keylessRepeatWarning).
   */
  private repeatedKeyless = 0;

  /** Rollouts repeating the rollout_id of another prompt's within their chunk (crossPromptRepeats), and the first. */
  private crossPrompt = 0;
  private firstCrossPrompt: string | undefined;

  /** The last request asked for the batch key. */
  private asked = false;
  /** The taker left a result of the chunk being read in it: it leaves the rest too. */
  private holding = false;
  /** The last request's keys, distinct, when some repeated in its chunk; else undefined. */
  private repeats: string[] | undefined;

  /** `batch.digest` is asked for only when a keyless rollout is met (a file's is read then). */
  constructor(private readonly batch: { readonly digest: string }) {}

  /** The summary's warnings about the batch's repeats: keylessRepeatWarning, crossPromptWarning. */
  warnings(): string[] {
    return [
      ...(this.repeatedKeyless > 0 ? [keylessRepeatWarning(this.repeatedKeyless)] : []),
      ...(this.crossPrompt > 0 ? [crossPromptWarning(this.crossPrompt, this.firstCrossPrompt!)] : []),
    ];
  }

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
    if (this.repeats !== undefined) {
      const cross = crossPromptRepeats(chunk);
      if (cross !== undefined) {
        this.crossPrompt += cross.count;
        this.firstCrossPrompt ??= cross.first;
      }
    }
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
      else if (r.rollout_id !== undefined) {
        if (taken === undefined || taken.delete(chunk.key(k))) acc.add(r);
        else acc.duplicate();
      } else if (this.keylessNew === true) acc.add(r);
      else {
        acc.duplicate();
        this.repeatedKeyless++;
      }
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
      else {
        acc.duplicate();
        this.repeatedKeyless++;
      }
      return true;
    };
  }
}

/**
 * Rollouts of a chunk whose rollout_id an earlier rollout of the chunk, of another prompt, has:
 * a producer numbering each group's rollouts 0..n−1 gave every prompt the same ids, and observe
 * kept the first prompt's rollouts and counted every other prompt's as duplicates (396 of 400),
 * saying nothing. They are still duplicates (a rollout id names one rollout); the summary warns
 * (crossPromptWarning). Looked for only within a chunk, and only when the chunk repeats a key:
 * ids kept across a whole batch would cost a map of them all.
 */
function crossPromptRepeats(chunk: ResultChunk): { count: number; first: string } | undefined {
  const first = new Map<string, number>();
  const { results } = chunk;
  let count = 0;
  let firstText: string | undefined;
  for (let k = 0; k < results.length; k++) {
    const id = results[k]!.rollout_id;
    if (id === undefined || results[k]!.finish_reason === 'abort') continue;
    const j = first.get(id);
    if (j === undefined) {
      first.set(id, k);
      continue;
    }
    if (results[j]!.prompt_id === results[k]!.prompt_id) continue;
    count++;
    if (firstText === undefined) {
      const at = (i: number) => (chunk.where === undefined ? '' : ` (${chunk.where(i)})`);
      firstText = `${quote(id)} of prompt ${quote(results[k]!.prompt_id)}${at(k)}, given to ${quote(results[j]!.prompt_id)}${at(j)}`;
    }
  }
  return count === 0 ? undefined : { count, first: firstText! };
}

/** The warning of rollouts counted as duplicates of another prompt's (crossPromptRepeats). */
export function crossPromptWarning(count: number, first: string): string {
  return `${count} rollouts repeat the rollout_id of a rollout of another prompt (the first: ${first}): counted as its duplicates, not applied; a rollout id names one rollout, so make ids unique across prompts, e.g. "<step>/<prompt_id>#<j>"`;
}

/**
 * The warning of an observe whose rollouts without a rollout_id were all taken for a batch
 * observed before. Such rollouts are known by the batch's content (a file's bytes, a request's
 * JSON): a retry of the same batch is then not counted twice, but new results that happen to
 * be the same (no step field, the same rewards as an earlier step) are not counted at all, and
 * the answer only said "duplicates".
 */
export function keylessRepeatWarning(count: number): string {
  return `${count} results without a rollout_id are a batch observed before (the same content: known by it), so they were not applied again; if they are new results, give each a rollout_id (or, where it has none, its step)`;
}
