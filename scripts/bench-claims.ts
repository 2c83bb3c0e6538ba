/**
 * The floor under `observe` with rollout ids into SQLite (`npm run bench` observe section):
 * the claimed keys' inserts alone. Every id of the results file goes into the claimed-keys
 * table (`seen`) of a new, empty state file (SqliteStore's own schema and settings), with the
 * store's statement (`INSERT OR IGNORE` of CLAIM_ROWS keys), in one transaction:
 * - as observe claims them: each RESULT_CHUNK_BYTES piece of the file's text, its keys sorted
 *   (store/claims.ts);
 * - all the keys sorted at once, which a reader of bounded memory cannot do: how much of the
 *   cost is where the keys land in the B-tree, not how many there are.
 * Only the inserts are timed (median of `runs`), not reading the file.
 */
import { join } from 'node:path';
import { RESULT_CHUNK_BYTES } from '../src/io/result-file.js';
import { lineChunks, SqliteStore } from '../src/index.js';
import { CLAIM_ROWS } from '../src/store/sqlite-apply.js';
import { MMAP_BYTES } from '../src/store/sqlite.js';
import { median, rmSqlite } from './bench-util.js';

/** The file's rollout ids in pieces of RESULT_CHUNK_BYTES of text, each piece's keys sorted. */
function keyPieces(file: string): string[][] {
  const pieces: string[][] = [];
  for (const { text } of lineChunks(file, file, RESULT_CHUNK_BYTES)) {
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

/** Seconds to insert `pieces` (in order, each piece's keys in order) into a new state's claimed-keys table. */
function insertOnce(path: string, pieces: readonly (readonly string[])[]): number {
  rmSqlite(path);
  new SqliteStore(path).close(); // the schema, in WAL mode (kept by the file)
  const db = new (SqliteStore.driver())(path);
  try {
    // The store's settings of a connection (store/sqlite.ts).
    db.pragma('synchronous = FULL');
    db.pragma(`mmap_size = ${MMAP_BYTES}`);
    const statements = new Map<number, ReturnType<typeof db.prepare>>();
    const insert = (count: number) => {
      let s = statements.get(count);
      if (s === undefined) statements.set(count, (s = db.prepare(`INSERT OR IGNORE INTO seen (rollout_id) VALUES ${'(?),'.repeat(count - 1)}(?)`)));
      return s;
    };
    const t0 = performance.now();
    db.transaction(() => {
      for (const keys of pieces) {
        for (let k = 0; k < keys.length; k += CLAIM_ROWS) {
          const part = keys.slice(k, k + CLAIM_ROWS);
          insert(part.length).run(part);
        }
      }
    })();
    return (performance.now() - t0) / 1000;
  } finally {
    db.close();
    rmSqlite(path);
  }
}

/** The claimed keys' inserts of `file` alone, in seconds: as observe orders them, and all sorted (medians of `runs`). */
export function claimReference(file: string, dir: string, runs = 3): { chunked: number; sorted: number } {
  const pieces = keyPieces(file);
  const all = [pieces.flat().sort()];
  const path = join(dir, 'claims-ref.db');
  const chunked: number[] = [];
  const sorted: number[] = [];
  for (let r = 0; r < runs; r++) {
    chunked.push(insertOnce(path, pieces));
    sorted.push(insertOnce(path, all));
  }
  return { chunked: median(chunked), sorted: median(sorted) };
}
