import { closeSync } from 'node:fs';
import { PackedVisit } from './packed-run.js';
import { blockBytes, decodeStep } from './step-block.js';
import { readFully, type StepEntry } from './step-index.js';
import type { ReplayRun, StepCounts, Visit } from './visits.js';
import { isCorrect } from '../fields.js';

/** How many steps' visits a StreamedRun keeps read (a replay asks about its step and a few later ones). */
const KEPT_STEPS = 16;

/** A run's scratch file (unlinked already) is closed when the run is collected. */
const scratchFiles = new FinalizationRegistry<number>((fd) => closeSync(fd));

interface ReadStep {
  readonly visits: PackedVisit[];
  readonly byId: Map<string, PackedVisit>;
  readonly pooled: Float64Array;
}

/**
 * A results or verl log in step order, a step at a time: the index pass (step-index.ts) wrote
 * each step's rollouts as a block and the pooled pass rates to scratch files; a step's visits
 * are made from its block when asked for, and the last KEPT_STEPS steps' are kept. Its answers
 * are those of a PackedRun of the same log (tested). Memory: KEPT_STEPS steps, an entry a step
 * and each distinct prompt's id, whatever the log's length.
 */
export class StreamedRun implements ReplayRun {
  readonly steps: number[];
  private readonly entries = new Map<number, StepEntry>();
  private readonly made = new Map<number, ReadStep>();

  /** From the index pass: the steps, each distinct prompt's id by number, and the two scratch files. */
  constructor(
    entries: readonly StepEntry[],
    private readonly names: readonly string[],
    private readonly blocksFd: number,
    private readonly pooledFd: number,
  ) {
    for (const e of entries) this.entries.set(e.step, e);
    this.steps = entries.map((e) => e.step);
    scratchFiles.register(this, blocksFd);
    scratchFiles.register(this, pooledFd);
  }

  at(step: number): readonly Visit[] {
    return this.read(step)?.visits ?? [];
  }

  visit(step: number, promptId: string): Visit | undefined {
    return this.read(step)?.byId.get(promptId);
  }

  pooledRate(visit: Visit): number {
    if (!(visit instanceof PackedVisit) || visit.run !== this) throw new Error(`pooledRate: the visit of ${visit.prompt_id} at step ${visit.step} is not from this run`);
    return this.read(visit.step)!.pooled[visit.group]!;
  }

  counts(step: number): StepCounts {
    const e = this.entries.get(step);
    return { visits: e?.groups ?? 0, rollouts: e?.rollouts ?? 0, withTokens: e?.withTokens ?? 0 };
  }

  /** The step's visits, read from the log when not kept; undefined for a step not logged. */
  private read(step: number): ReadStep | undefined {
    const kept = this.made.get(step);
    if (kept !== undefined) {
      this.made.delete(step);
      this.made.set(step, kept);
      return kept;
    }
    const entry = this.entries.get(step);
    if (entry === undefined) return undefined;
    if (this.made.size >= KEPT_STEPS) this.made.delete(this.made.keys().next().value!);
    const made = this.readStep(entry);
    this.made.set(step, made);
    return made;
  }

  /** Reads the step's block back from the scratch file into packed visits. */
  private readStep(entry: StepEntry): ReadStep {
    const buffer = new ArrayBuffer(blockBytes(entry));
    readFully(this.blocksFd, new Uint8Array(buffer), entry.offset);
    const { prompts, sizes, rollouts } = decodeStep(buffer, entry);
    const visits: PackedVisit[] = [];
    const byId = new Map<string, PackedVisit>();
    for (let g = 0, offset = 0; g < entry.groups; g++) {
      const n = sizes[g]!;
      let correct = 0;
      for (let k = offset; k < offset + n; k++) if (isCorrect(rollouts.rewards[k]!)) correct++;
      const v = new PackedVisit(entry.step, this.names[prompts[g]!]!, n, correct, rollouts, offset, this, g);
      visits.push(v);
      byId.set(v.prompt_id, v);
      offset += n;
    }
    const pooled = new Float64Array(entry.groups);
    readFully(this.pooledFd, new Uint8Array(pooled.buffer), entry.firstGroup * 8);
    return { visits, byId, pooled };
  }
}
