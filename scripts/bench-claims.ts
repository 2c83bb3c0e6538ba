/**
 * The floor under `observe` with rollout ids into SQLite (`npm run bench` observe section):
 * the claimed keys' inserts alone. Every id of the results file goes into a bare table of the
 * state's claimed-keys shape (`seen`: TEXT PRIMARY KEY, WITHOUT ROWID) in a new file, with
 * the store's settings (WAL, synchronous=FULL, the memory map) and its statements (`INSERT OR
 * IGNORE`, 500 keys a statement), in one transaction:
 * - as observe claims them: each 512 kB piece of the file's text, its keys sorted
 *   (store/claims.ts, io/results.ts RESULT_CHUNK_BYTES);
 * - all the keys sorted at once, which no bounded-memory reader can do: how much of the cost
 *   is where the keys land in the B-tree, not how many there are.
 * Only the inserts are timed (median of `runs`), not reading the file.
 */
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { lineChunks, SqliteStore } from '../src/index.js';
import { median } from './bench-util.js';

/** Text of a results chunk, as observe reads it (io/results.ts RESULT_CHUNK_BYTES). */
const CHUNK_BYTES = 1 << 19;
/** Keys a statement, as the store's claims (store/sqlite-apply.ts CLAIM_ROWS). */
const PER_STATEMENT = 500;

/** The file's rollout ids in pieces of CHUNK_BYTES of text, each piece's keys sorted. */
function keyPieces(file: string): string[][] {
  const pieces: string[][] = [];
  for (const { text } of lineChunks(file, file, CHUNK_BYTES)) {
    const keys: string[] = [];
    for (const line of text.split('\n')) {
      if (line === '') continue;
      const id = (JSON.parse(line) as { rollout_id?: unknown }).rollout_id;
      if (typeof id === 'string') keys.push(id);
    }
    pieces.push(keys.sort());
  }
  return pieces;
}

/** Seconds to insert `pieces` (in order, each piece's keys in order) into a new claimed-keys table. */
function insertOnce(path: string, pieces: readonly (readonly string[])[]): number {
  for (const suffix of ['', '-wal', '-shm']) rmSync(`${path}${suffix}`, { force: true });
  const Database = SqliteStore.driver();
  const db = new Database(path);
  try {
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = FULL');
    db.pragma(`mmap_size = ${1 << 30}`);
    db.exec('CREATE TABLE seen (rollout_id TEXT PRIMARY KEY) WITHOUT ROWID');
    const statements = new Map<number, ReturnType<typeof db.prepare>>();
    const insert = (count: number) => {
      let s = statements.get(count);
      if (s === undefined) statements.set(count, (s = db.prepare(`INSERT OR IGNORE INTO seen (rollout_id) VALUES ${'(?),'.repeat(count - 1)}(?)`)));
      return s;
    };
    const t0 = performance.now();
    db.transaction(() => {
      for (const keys of pieces) {
        for (let k = 0; k < keys.length; k += PER_STATEMENT) {
          const part = keys.slice(k, k + PER_STATEMENT);
          insert(part.length).run(part);
        }
      }
    })();
    return (performance.now() - t0) / 1000;
  } finally {
    db.close();
    for (const suffix of ['', '-wal', '-shm']) rmSync(`${path}${suffix}`, { force: true });
  }
}

/** The claimed keys' inserts of `file` alone: as observe orders them, and all sorted (medians of `runs`). */
export function claimReference(file: string, dir: string, runs = 3): { chunked: number; sorted: number; keys: number } {
  const pieces = keyPieces(file);
  const all = [pieces.flat().sort()];
  const path = join(dir, 'claims-ref.db');
  const chunked: number[] = [];
  const sorted: number[] = [];
  for (let r = 0; r < runs; r++) {
    chunked.push(insertOnce(path, pieces));
    sorted.push(insertOnce(path, all));
  }
  return { chunked: median(chunked), sorted: median(sorted), keys: all[0]!.length };
}
