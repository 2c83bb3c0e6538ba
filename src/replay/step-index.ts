import { closeSync, openSync, readSync, rmSync, rmdirSync, unlinkSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { tempFolder, tempWriteFailed } from '../io/temp-folder.js';
import { RolloutStore } from './log-store.js';
import { encodeStep, type StepShape } from './step-block.js';

/** One logged step as the index pass saw it: its block in the scratch file (step-block.ts). */
export interface StepEntry extends StepShape {
  readonly step: number;
  /** Where its block starts in the scratch file. */
  readonly offset: number;
  /** Its first group's number in the run (groups numbered in step order, first seen first). */
  readonly firstGroup: number;
  /** Rollouts with a token count. */
  readonly withTokens: number;
}

/** The index pass stops here: the log's steps are not in ascending, contiguous runs. */
export class NotInStepOrder extends Error {}

/** Ints a group record holds in the scratch file: prompt, n, correct, and the prompt's previous group's n and correct (-1: none). */
const RECORD = 5;
/** Groups per block written or swept. */
const BLOCK = 1 << 14;

/**
 * A scratch file that disappears with its descriptor: made in a fresh folder under the temp
 * dir and unlinked at once where the system allows it (else removed when the process exits),
 * so nothing is left behind, even by a killed run.
 */
export function scratchFile(): number {
  const dir = tempFolder('rollout-budget-replay-', 'the replay\'s scratch file');
  const path = join(dir, 'scratch');
  const fd = openSync(path, 'w+');
  try {
    unlinkSync(path);
    rmdirSync(dir);
  } catch {
    process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
  }
  return fd;
}

/** Writes all of `bytes` at `position`; a failed write (a full temp disk) is an IO_ERROR saying so. */
function writeFully(fd: number, bytes: Uint8Array, position: number): void {
  try {
    for (let done = 0; done < bytes.length; ) done += writeSync(fd, bytes, done, bytes.length - done, position + done);
  } catch (error) {
    throw tempWriteFailed('the replay\'s scratch file', error);
  }
}

/** Fills `into` from `position` (a short read of a scratch file is a bug). */
export function readFully(fd: number, into: Uint8Array, position: number): void {
  for (let done = 0; done < into.byteLength; ) {
    const got = readSync(fd, into, done, into.byteLength - done, position + done);
    if (got === 0) throw new Error('scratch file shorter than written');
    done += got;
  }
}

/**
 * The one pass over a results or verl log in step order: each step's rollouts are packed as
 * they come (log-store.ts) and, once the step's lines are all read, go to a scratch file as a
 * block (step-block.ts, 1–13 bytes a rollout), with per group (in a second scratch file, 20 bytes a group) its prompt,
 * counts and the prompt's previous group's counts; `pooledRates` then sweeps the groups
 * backwards into the pooled pass rates (LoggedRun.pooledRate), 8 bytes a group on disk.
 * Memory: one step packed (1–13 bytes a rollout, ~70 a group), an entry a step, and two ints
 * and the id of each distinct prompt. Throws NotInStepOrder when a step's rollouts come after a later step's (the caller
 * then holds the log packed in memory instead).
 */
export class LogIndexer {
  readonly entries: StepEntry[] = [];
  /** Each distinct prompt's id, by its number. */
  readonly names: string[] = [];
  /** The steps' blocks. */
  readonly blocks = scratchFile();
  private blocksEnd = 0;
  /** The group records. */
  private readonly fd = scratchFile();
  private readonly out = new Int32Array(BLOCK * RECORD);
  private outGroups = 0;
  private written = 0;
  /** Per distinct prompt: its number, and its last group's n and correct. */
  private readonly promptIndex = new Map<string, number>();
  private lastN = new Int32Array(1024);
  private lastCorrect = new Int32Array(1024);
  /** The open step, its rollouts packed as they come (log-store.ts). */
  private step: number | undefined;
  private store = new RolloutStore();
  private withTokens = 0;

  /** Adds one rollout (a RolloutSink). */
  add(step: number, prompt: string, reward: number, tokens: number | undefined): void {
    if (step !== this.step) {
      if (this.step !== undefined && step < this.step) throw new NotInStepOrder();
      this.closeStep();
      this.step = step;
    }
    this.store.add(step, prompt, reward, tokens);
    if (tokens !== undefined) this.withTokens++;
  }

  private promptNumber(prompt: string): number {
    let p = this.promptIndex.get(prompt);
    if (p === undefined) {
      p = this.promptIndex.size;
      this.promptIndex.set(prompt, p);
      this.names.push(prompt);
      if (p === this.lastN.length) {
        const grow = (a: Int32Array) => {
          const b = new Int32Array(2 * a.length);
          b.set(a);
          return b;
        };
        this.lastN = grow(this.lastN);
        this.lastCorrect = grow(this.lastCorrect);
      }
      this.lastN[p] = -1;
    }
    return p;
  }

  /** Writes the open step's block, and its group records with each prompt's previous counts. */
  private closeStep(): void {
    if (this.step === undefined) return;
    const groups = this.store.packed();
    const prompts = Int32Array.from(groups.prompt, (p) => this.promptNumber(groups.prompts[p]!));
    const { shape, bytes } = encodeStep(prompts, groups.n, groups.rollouts);
    writeFully(this.blocks, bytes, this.blocksEnd);
    this.entries.push({ step: this.step, offset: this.blocksEnd, firstGroup: this.written + this.outGroups, withTokens: this.withTokens, ...shape });
    this.blocksEnd += bytes.length;
    for (let g = 0; g < prompts.length; g++) {
      const p = prompts[g]!;
      const at = this.outGroups++ * RECORD;
      this.out[at] = p;
      this.out[at + 1] = groups.n[g]!;
      this.out[at + 2] = groups.correct[g]!;
      this.out[at + 3] = this.lastN[p]!;
      this.out[at + 4] = this.lastCorrect[p]!;
      this.lastN[p] = groups.n[g]!;
      this.lastCorrect[p] = groups.correct[g]!;
      if (this.outGroups === BLOCK) this.flush();
    }
    this.step = undefined;
    this.store = new RolloutStore();
    this.withTokens = 0;
  }

  private flush(): void {
    writeFully(this.fd, new Uint8Array(this.out.buffer, 0, this.outGroups * RECORD * 4), this.written * RECORD * 4);
    this.written += this.outGroups;
    this.outGroups = 0;
  }

  /**
   * Ends the pass: the pooled pass rate of every group, in a scratch file of doubles (group g
   * at byte 8g), swept backwards over the records in blocks: the prompt's correct / n over
   * the group, its previous group and its next one, 0 when n is 0, as PackedRun computes it.
   * Frees the records. O(groups) time, O(distinct prompts + BLOCK) memory.
   */
  pooledRates(): number {
    this.closeStep();
    this.flush();
    const groups = this.written;
    const nextN = new Int32Array(this.promptIndex.size).fill(-1);
    const nextCorrect = new Int32Array(this.promptIndex.size);
    this.promptIndex.clear();
    const pooledFd = scratchFile();
    try {
      const records = new Int32Array(BLOCK * RECORD);
      const pooled = new Float64Array(BLOCK);
      for (let hi = groups; hi > 0; hi -= BLOCK) {
        const lo = Math.max(0, hi - BLOCK);
        readFully(this.fd, new Uint8Array(records.buffer, 0, (hi - lo) * RECORD * 4), lo * RECORD * 4);
        for (let g = hi - 1; g >= lo; g--) {
          const r = (g - lo) * RECORD;
          const p = records[r]!;
          let k = records[r + 2]!;
          let m = records[r + 1]!;
          if (records[r + 3]! >= 0) {
            k += records[r + 4]!;
            m += records[r + 3]!;
          }
          if (nextN[p]! >= 0) {
            k += nextCorrect[p]!;
            m += nextN[p]!;
          }
          pooled[g - lo] = m > 0 ? k / m : 0;
          nextN[p] = records[r + 1]!;
          nextCorrect[p] = records[r + 2]!;
        }
        writeFully(pooledFd, new Uint8Array(pooled.buffer, 0, (hi - lo) * 8), lo * 8);
      }
    } catch (error) {
      closeSync(pooledFd);
      throw error;
    } finally {
      closeSync(this.fd);
    }
    return pooledFd;
  }

  /** Gives the scratch files back (the pass stopped). */
  discard(): void {
    closeSync(this.fd);
    closeSync(this.blocks);
  }
}
