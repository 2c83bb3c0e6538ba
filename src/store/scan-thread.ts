/**
 * The body of a state-reading thread (worker_threads), started by readStateAhead
 * (store/scan-ahead.ts): on its own connection, in one read transaction, reads a SQLite state's
 * prompts into columns (store/sqlite-scan.ts) and its last step, and hands the columns'
 * buffers to the thread that started it without a copy. It only reads; a file that is not
 * there is not made. Anything it cannot read (an older schema, a row the columns cannot hold,
 * a lock, any error) it answers with `none`, and the caller reads the state itself.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { StateColumns } from '../posterior/state-columns.js';
import type { ScanReply } from './scan-ahead.js';
import { sqliteDriver } from './sqlite-driver.js';
import { lastStepReader } from './sqlite-last-step.js';
import { PromptScan } from './sqlite-scan.js';

const { path, mmapBytes } = workerData as { path: string; mmapBytes: number };
const port = parentPort!;

function reply(): { message: ScanReply; transfer: ArrayBuffer[] } {
  const driver = sqliteDriver();
  const db = new driver.Database(path, { readonly: true, fileMustExist: true, ...driver.options });
  try {
    db.exec(`PRAGMA mmap_size = ${mmapBytes}`);
    const lastStep = lastStepReader(db);
    const scan = new PromptScan(db);
    const read = db.transaction(() => ({ columns: scan.read(), last: lastStep() }));
    const { columns, last } = read();
    if (columns === undefined) return { message: { kind: 'none', reason: 'a row the columns cannot hold' }, transfer: [] };
    const parts = columns.parts(false);
    return { message: { kind: 'columns', parts, lastStep: last }, transfer: StateColumns.buffers(parts) };
  } finally {
    db.close();
  }
}

try {
  const { message, transfer } = reply();
  port.postMessage(message, transfer);
} catch (error) {
  port.postMessage({ kind: 'none', reason: (error as Error).message } satisfies ScanReply);
}
