import { statSync } from 'node:fs';
import { RolloutBudgetError } from '../errors.js';
import { checkReadable, fileDigest, lineChunks } from './chunks.js';
import { LinesChunk, resultsOfText, type ResultSource, type ResultTaker } from './results.js';

// A results file read as a source, chunk by chunk, and told apart from a file changed while read.

/**
 * Text of a results chunk: 512 kB, about 8,000 rollouts. A chunk's results live until the
 * store has sorted them, so the larger the chunk, the more of them a young-generation
 * collection finds alive and copies: observing 10⁶ rollouts, 4 MB → 1 MB took the peak from
 * 237 to 182 MB for the same time, and 1 MB → 512 kB from 188 to 145 MB and 1.86–1.96 to
 * 1.65–1.76 s of CPU (256 kB: 142 MB, 1.77–1.83 s, a chunk's own costs showing).
 */
export const RESULT_CHUNK_BYTES = 1 << 19;

/**
 * A results file as a source (chunks of RESULT_CHUNK_BYTES of text, io/chunks.ts), read chunk
 * by chunk as a store consumes it. Memory: one chunk, not the file. The digest is read from the
 * file when first asked for, which is when a line without a rollout_id needs its key: a file
 * whose every line has one is read once, not twice (10⁶ rollouts: 94 MB, about 70 ms hashed).
 */
export function fileResultSource(path: string, name: string, chunkBytes = RESULT_CHUNK_BYTES): ResultSource {
  checkReadable(path);
  let digest: string | undefined;
  // The file as it was hashed: lines keyed by its digest must be the lines hashed, so a file
  // written to (or replaced) while it is read is an error before the store commits. Appended
  // to while observe ran, its new lines were applied under the digest of the file without
  // them, then applied again by the next observe of the whole file, under the whole one's.
  let hashed: FileStamp | undefined;
  const source: ResultSource = {
    get digest() {
      if (digest === undefined) {
        const before = stampOf(path);
        digest = fileDigest(path);
        hashed = stampOf(path);
        if (!sameStamp(before, hashed) && !sameContents(path, before, hashed, digest)) throw changedWhileRead(name);
      }
      return digest;
    },
    *chunks(take?: ResultTaker) {
      for (const piece of lineChunks(path, name, chunkBytes)) {
        const chunk = new LinesChunk(source, take, name);
        resultsOfText(piece.text, name, chunk.sink, piece);
        yield chunk;
      }
      if (hashed !== undefined && digest !== undefined) {
        const now = stampOf(path);
        if (!sameStamp(hashed, now) && !sameContents(path, hashed, now, digest)) throw changedWhileRead(name);
      }
    },
  };
  return source;
}

/** What tells a file's contents apart without reading them: its inode, size and change times. */
type FileStamp = { ino: bigint; size: bigint; mtimeNs: bigint; ctimeNs: bigint };

function stampOf(path: string): FileStamp {
  const s = statSync(path, { bigint: true });
  return { ino: s.ino, size: s.size, mtimeNs: s.mtimeNs, ctimeNs: s.ctimeNs };
}

function sameStamp(a: FileStamp, b: FileStamp): boolean {
  return a.ino === b.ino && a.size === b.size && a.mtimeNs === b.mtimeNs && a.ctimeNs === b.ctimeNs;
}

/**
 * Whether a file whose stamp went from `a` to `b` still holds the bytes hashed as `digest`: the
 * same inode and size, and the same digest when hashed again (with no change while hashed). A
 * `touch` or `chmod` moves the change times alone; a write of the same size is told apart by the
 * digest. Read again only in that rare case.
 */
function sameContents(path: string, a: FileStamp, b: FileStamp, digest: string): boolean {
  if (a.ino !== b.ino || a.size !== b.size) return false;
  const again = fileDigest(path);
  return again === digest && sameStamp(b, stampOf(path));
}

function changedWhileRead(name: string): RolloutBudgetError {
  return new RolloutBudgetError('BAD_INPUT', `${name}: the file changed while it was read (written to, or replaced): nothing was applied; observe it again once its writer is done`);
}
