import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Worker as WorkerType } from 'node:worker_threads';
import { lazyRequire } from '../lazy.js';
import { StateColumns, type StateColumnParts } from '../posterior/state-columns.js';
import { unwritableReason } from './sqlite-read-only.js';
import { statIfThere } from '../io/paths.js';

/** node:worker_threads, loaded when a state is large enough to be read by a thread (not by a small plan). */
const threads = lazyRequire<typeof import('node:worker_threads')>('node:worker_threads');

/**
 * Below this many bytes of state file (with its WAL), a state is read where it is used: a
 * thread's start (~25 ms of the other core, its own module loads and SQLite connection) costs
 * more than reading a small state takes.
 */
export const SCAN_AHEAD_BYTES = 8 << 20;

/** A state read by another thread: its prompts as columns and its last step, from one read transaction. */
export interface ScannedState {
  readonly columns: StateColumns;
  readonly lastStep: number | null;
}

/** What the reading thread (store/scan-thread.ts) answers. */
export type ScanReply =
  | { readonly kind: 'columns'; readonly parts: StateColumnParts; readonly lastStep: number | null }
  | { readonly kind: 'none'; readonly reason: string };

/** A state being read by another thread. */
export interface StateReadAhead {
  /** The state read, or undefined when the thread could not read it (the caller then reads it itself). */
  readonly result: Promise<ScannedState | undefined>;
  /** Stops the thread (a command that failed before it needed the state). */
  cancel(): void;
}

/**
 * Starts reading a SQLite state file's prompts in a worker thread (store/scan-thread.ts), so
 * the CLI's plan reads its prompts file meanwhile on this one: on 2 cores a warm plan of 10⁶
 * prompts then spends the longer of the two reads, not their sum. The thread only reads, on
 * its own connection: the columns are those a full snapshot (SqliteStore.snapshot) would read
 * at that moment, to be handed to the store with SqliteStore.useScan. Undefined (nothing
 * started) for ':memory:', a file not there or empty, one under `minBytes` with its WAL, one
 * this user cannot write, or a build without the thread's file.
 */
export function readStateAhead(path: string, mmapBytes: number, minBytes = SCAN_AHEAD_BYTES): StateReadAhead | undefined {
  const bytes = path === ':memory:' ? 0 : fileBytes(path);
  // A state this user cannot write: its thread's connection would leave -wal and -shm files beside it (store/sqlite-read-only.ts).
  if (bytes === 0 || bytes < minBytes || unwritableReason(path) !== undefined) return undefined;
  const entry = threadEntry();
  if (entry === undefined) return undefined;
  const worker: WorkerType = new (threads().Worker)(entry, { workerData: { path, mmapBytes } });
  worker.unref(); // never keeps the process alive
  const result = new Promise<ScannedState | undefined>((resolve) => {
    worker.once('message', (reply: ScanReply) =>
      resolve(reply.kind === 'columns' ? { columns: new StateColumns(reply.parts.capacity, reply.parts), lastStep: reply.lastStep } : undefined));
    worker.once('error', () => resolve(undefined));
    worker.once('exit', () => resolve(undefined));
  });
  return { result, cancel: () => void worker.terminate() };
}

/** The file's size and its WAL's; 0 when it is not there, cannot be read (its folder is a file: ENOTDIR) or is empty. */
function fileBytes(path: string): number {
  const size = (p: string) => statIfThere(p)?.size ?? 0;
  const bytes = size(path);
  return bytes === 0 ? 0 : bytes + size(`${path}-wal`);
}

/** The thread's module: beside this one, or from the CLI's bundle (dist/cli/) in dist/src/store/. */
function threadEntry(): URL | undefined {
  for (const relative of ['./scan-thread.js', '../../dist/src/store/scan-thread.js']) {
    const url = new URL(relative, import.meta.url);
    if (existsSync(fileURLToPath(url))) return url;
  }
  return undefined;
}
