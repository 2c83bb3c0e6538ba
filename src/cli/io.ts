import { closeSync, createReadStream, createWriteStream, lstatSync, openSync, readlinkSync, realpathSync, renameSync, rmSync, writeSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { cannotRead, RolloutBudgetError } from '../errors.js';
import { lazyRequire } from '../lazy.js';
import { readText } from '../io/jsonl.js';
import type { PlanChunk } from '../plan/byte-chunk.js';
import { chunkText } from '../text-chunk.js';
import { refuseDevice } from '../io/chunks.js';
import { tempFolder, tempWriteFailed } from '../io/temp-folder.js';
import { decodeUtf8 } from '../io/utf8.js';
import { statIfThere } from '../io/paths.js';
import { removeStaleSpools, removeStaleTemps } from './stale-temps.js';
import { isPostgresUrl, redactUrl } from '../store/url.js';

/**
 * node:stream/promises, for spooling stdin only. A require, not `import()`: the bin runs the
 * bundle as a vm.Script, where a dynamic import of a built-in fails
 * (ERR_VM_DYNAMIC_IMPORT_CALLBACK_MISSING).
 */
const streams = lazyRequire<typeof import('node:stream/promises')>('node:stream/promises');
const readable = lazyRequire<typeof import('node:stream')>('node:stream');

/** Everything the CLI touches outside itself, so tests run it in-process. */
export interface CliIo {
  stdout(text: string): void;
  stderr(text: string): void;
  readStdin(): Promise<string>;
  /** True when stderr is a terminal (progress bars). */
  readonly stderrIsTty: boolean;
  /** How long a run lasts before its progress bar draws, in ms (default 2000; tests set 0). */
  readonly progressAfterMs?: number;
  /**
   * Copies stdin into a temporary file and returns its path, for inputs read in chunks (a
   * results file of any size); without it, such commands read stdin with readStdin.
   */
  spoolStdin?(): Promise<string>;
}

/**
 * Writes to a standard stream that may be a pipe its reader closed (`rollout-budget ... | head`):
 * EPIPE then ends the writing to it, quietly, and the command finishes its work (its state, its
 * report files) and exits with its own code, where Node would crash with an unhandled 'error'
 * event and a stack trace. Any other error of the stream is thrown as before. The listener is
 * added on the first write: process.stdout and process.stderr are made on first use (~4 ms).
 */
function guardedWriter(stream: () => NodeJS.WriteStream): (text: string | Uint8Array) => void {
  let closed = false;
  let guarded = false;
  return (text) => {
    if (closed) return;
    const s = stream();
    if (!guarded) {
      guarded = true;
      s.on('error', (error: NodeJS.ErrnoException) => {
        if (error.code !== 'EPIPE') throw error;
        closed = true;
      });
    }
    s.write(text);
  };
}

/**
 * Writes to file descriptor 2 directly: process.stderr is made on first use (~3 ms of loading
 * tty, net and stream, measured on a piped stderr), which a plan that only prints its warnings
 * need not pay. A blocking fd 2 takes the whole text (the loop covers a short write); one
 * another owner made non-blocking (EAGAIN) goes through process.stderr from then on, and a
 * reader that went away (EPIPE) ends the writing quietly.
 */
function stderrWriter(): (text: string) => void {
  let closed = false;
  let stream: ((text: string | Uint8Array) => void) | undefined;
  return (text) => {
    if (closed) return;
    if (stream !== undefined) return stream(text);
    const bytes = Buffer.from(text);
    let done = 0;
    try {
      while (done < bytes.length) done += writeSync(2, bytes, done);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === 'EPIPE') closed = true;
      else if (code === 'EAGAIN') (stream = guardedWriter(() => process.stderr))(bytes.subarray(done));
      else throw error;
    }
  };
}

export const processIo: CliIo = {
  stdout: guardedWriter(() => process.stdout),
  stderr: stderrWriter(),
  readStdin: async () => {
    const chunks: Buffer[] = [];
    for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
    return decodeUtf8(Buffer.concat(chunks), '<stdin>');
  },
  // Read when asked (progress bars): process.stderr is made on first use (~4 ms of loading
  // tty, net and stream), which a command that never writes to stderr need not pay.
  get stderrIsTty() {
    return Boolean(process.stderr.isTTY);
  },
  spoolStdin: () => spool(process.stdin, 'rollout-budget-stdin-', 'the copy of stdin'),
};

/**
 * Copies a stream into a new temporary folder (`prefix` + random) and returns the copy's path;
 * remove the folder (the path's parent) when done. The folder is removed here if the copy fails.
 */
async function spool(source: NodeJS.ReadableStream, prefix: string, what: string): Promise<string> {
  // Removed by the caller's done(), or by a Ctrl-C before it (the one registration a spool
  // makes). The handler is in place before the folder is made: a Ctrl-C in between met Node's
  // default action and left the folder (a quarter of the signals sent right after it appeared).
  let dir: string | undefined;
  onEndingSignal(() => {
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  });
  removeStaleSpools(prefix);
  dir = tempFolder(`${prefix}${process.pid}-`, what);
  const path = join(dir, 'input.jsonl');
  const target = createWriteStream(path);
  let writeError: unknown;
  target.once('error', (error) => (writeError = error));
  try {
    await streams().pipeline(source, target);
  } catch (error) {
    rmSync(dir, { recursive: true, force: true });
    // The copy's own write failing (a full temp disk) is said as such; a read error as it is.
    throw writeError !== undefined ? tempWriteFailed(what, writeError) : error;
  }
  return path;
}

/**
 * A path that can be read more than once. A file or folder is itself; a pipe or device (a
 * shell's `<(...)` as /dev/fd/N, /dev/stdin, a FIFO) is first copied into a temporary file,
 * since a pipe gives its bytes once and the readers that take a path read it twice (observe:
 * the digest, then the chunks; replay: an out-of-order log again, packed). `done()` removes
 * the copy. O(size) for a pipe, nothing for a file.
 */
export async function rereadable(path: string, io?: CliIo): Promise<{ path: string; done: () => void }> {
  if (path === '-' && io !== undefined) {
    // stdin, as plan --prompts - and observe --results - take it: streamed into a temporary
    // file (io.spoolStdin), never held whole (a 10⁷-rollout log is over a gigabyte); an io
    // without it (tests in-process) gives its text.
    const copy = io.spoolStdin !== undefined
      ? await io.spoolStdin()
      : await spool(readable().Readable.from([await io.readStdin()]), 'rollout-budget-input-', 'the copy of stdin');
    return { path: copy, done: () => rmSync(dirname(copy), { recursive: true, force: true }) };
  }
  const stat = statIfThere(path);
  if (stat === undefined || stat.isFile() || stat.isDirectory()) return { path, done: () => undefined };
  refuseDevice(path, stat);
  let copy: string;
  try {
    copy = await spool(createReadStream(path), 'rollout-budget-input-', `the copy of ${path}`);
  } catch (error) {
    if (error instanceof RolloutBudgetError) throw error;
    throw cannotRead(path, error);
  }
  return { path: copy, done: () => rmSync(dirname(copy), { recursive: true, force: true }) };
}

/** Reads a path, or stdin for '-'. Returns the text and the name errors should use. */
export async function readInput(io: CliIo, path: string): Promise<{ text: string; name: string }> {
  if (path === '-') return { text: await io.readStdin(), name: '<stdin>' };
  return { text: readText(path), name: path };
}

/**
 * Checks, before a command's work, that an output path ('-': stdout) can be written where it
 * points: its folder is there and it is not itself a folder. The message starts as writeChunks's
 * would after the work (`cannot write (ENOENT)`) and names the folder, so a mistyped folder costs
 * no generation and no plan. Other failures (no space, no permission) still come from the write.
 */
export function checkOutput(path: string, inputs: Readonly<Record<string, string | undefined>> = {}): void {
  if (path === '-') return;
  // A state's URL given where a file goes: was taken for a path, its password printed in the error.
  if (isPostgresUrl(path)) throw new RolloutBudgetError('BAD_OPTION', `${redactUrl(path)}: a PostgreSQL URL, where a file path is expected (a state's URL goes to --state)`);
  sameFileAsInput(path, inputs);
  // The folder the writer will write in: a symlink to a file not there yet is followed, as the writer follows it.
  const parent = dirname(statIfThere(path) === undefined ? danglingTarget(path) : path);
  const folder = statIfThere(parent);
  const why =
    folder === undefined ? `ENOENT): there is no folder ${parent}` : !folder.isDirectory() ? `ENOTDIR): ${parent} is not a folder` : statIfThere(path)?.isDirectory() ? 'EISDIR): it is a folder' : undefined;
  if (why !== undefined) throw new RolloutBudgetError('IO_ERROR', `${path}: cannot write (${why}`);
}

/**
 * Refuses an output that is one of the command's inputs (`inputs`: flag → path; '-', ':memory:'
 * and URLs are skipped): the same file by device and inode, so through links and other
 * spellings too, or, when neither is there yet, the same place (a new state the plan makes,
 * which its file then replaced), a symlink to a file not there yet followed to where it leads
 * (the writer follows it so: a plan was written through such a link over the new state).
 * Writing it would replace the input with the output, a state file with a plan.
 */
function sameFileAsInput(path: string, inputs: Readonly<Record<string, string | undefined>>): void {
  const out = statIfThere(path);
  if (out !== undefined && !out.isFile()) return;
  for (const [flag, input] of Object.entries(inputs)) {
    if (input === undefined || input === '-' || input === ':memory:' || input.includes('://')) continue;
    const there = statIfThere(input);
    // Neither there yet (a new state the command makes, then the plan renamed over it): compare where they would be.
    const same = out !== undefined && there !== undefined ? there.dev === out.dev && there.ino === out.ino : out === undefined && there === undefined && placeOf(danglingTarget(input)) === placeOf(danglingTarget(path));
    if (same) {
      throw new RolloutBudgetError('BAD_OPTION', `--out ${path} is the ${flag} file ${input}: writing it would replace that input; give another path (nothing was written)`);
    }
  }
}

/** Where a path that is not there yet would be: its folder's real path and its name. */
function placeOf(path: string): string {
  try {
    return join(realpathSync(dirname(path)), basename(path));
  } catch {
    return resolve(path);
  }
}

/**
 * Where writeChunks writes `path`, and how. A regular file, or none yet, is replaced atomically
 * (temp file + rename), through the symlinks that lead to it, so a link stays a link. Anything
 * else (/dev/null, /dev/stdout, a FIFO, a shell's `>(...)` as /dev/fd/N) is written in place:
 * a rename would put a regular file where the device or pipe was (as root, /dev/null itself).
 */
export function outputTarget(path: string): { path: string; atomic: boolean } {
  const stat = statIfThere(path);
  if (stat === undefined) return { path: danglingTarget(path), atomic: true };
  if (!stat.isFile()) return { path, atomic: false };
  return { path: realpathSync(path), atomic: true };
}

/**
 * The file a symlink at `path` leads to when that file is not there yet (a link made before
 * the first plan), followed link by link as the shell's `>` does; `path` itself when it is
 * no link. The rename put a regular file where the link was.
 */
function danglingTarget(path: string): string {
  let at = path;
  for (let hops = 0; hops < 40; hops++) {
    let link: string;
    try {
      if (!lstatSync(at).isSymbolicLink()) return at;
      link = readlinkSync(at);
    } catch {
      return at;
    }
    // From the link's real folder, as the kernel follows it: `..` after a folder reached through a link is that folder's parent.
    at = resolve(realpathSync(dirname(at)), link);
  }
  return at;
}

/** The signals that end a command which has no handler of its own for them. */
const ENDING_SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;
/** What an ending signal removes before it ends the process (temp files and folders). */
const cleanups = new Set<() => void>();
let relaying = false;

/**
 * Registers `cleanup` (the removal of a temp file or folder) to run when an ending signal
 * that the command does not handle itself (Ctrl-C during `plan` or `observe`) ends the
 * process; returns its removal, for when the temp file is gone. Before, such a signal killed
 * the process at once, and it left its temp files: a plan's `<out>.tmp-<pid>`, as large as the
 * plan so far (100 to 200 MB at 10⁶ prompts), a copy of the results read from a pipe in
 * /tmp. A handler runs when JavaScript gets back to the event loop: during an asynchronous
 * phase (copying a pipe) at once, during a synchronous one (writing the plan) once that is
 * over, so a plan's temp file is then renamed into place or removed already. Each handler
 * runs the cleanups, takes itself away and sends its signal again, which then ends the
 * process as it would have (exit code 128 + the signal); a process that ends first (its
 * command done) ends as without the signal. Signals the command handles itself (serve,
 * execute, loop: cli/signals.ts) are left to it.
 */
export function onEndingSignal(cleanup: () => void): () => void {
  relaySignals();
  cleanups.add(cleanup);
  return () => cleanups.delete(cleanup);
}

function relaySignals(): void {
  if (relaying) return;
  relaying = true;
  for (const name of ENDING_SIGNALS) {
    if (process.listenerCount(name) > 0) continue;
    const relay = (): void => {
      for (const cleanup of cleanups) {
        try {
          cleanup();
        } catch {
          // ending anyway: a temp file that cannot be removed stays
        }
      }
      cleanups.clear();
      process.off(name, relay);
      if (process.listenerCount(name) === 0) process.kill(process.pid, name);
    };
    process.on(name, relay);
  }
}

/** Writes to stdout for '-', else atomically (temp file + rename): never a partial file. */
export function writeOutput(io: CliIo, path: string, text: string): void {
  writeChunks(io, path, [text]);
}

/**
 * writeOutput for text in chunks (a large plan; a chunk of bytes is UTF-8 text, valid until
 * the next is asked for): each chunk is written as it comes, so the whole text is never held;
 * a file is still written to a temp file and renamed, and removed if anything fails (a chunk's
 * producer may throw, e.g. a prompt an export cannot send); a device or pipe is written in
 * place (outputTarget).
 */
export function writeChunks(io: CliIo, path: string, chunks: Iterable<PlanChunk>): void {
  if (path === '-') {
    for (const chunk of chunks) io.stdout(chunkText(chunk));
    return;
  }
  let tmp: string | undefined;
  let fd: number | undefined;
  let forget = (): void => undefined;
  try {
    const target = outputTarget(path);
    tmp = target.atomic ? `${target.path}.tmp-${process.pid}` : undefined;
    if (tmp !== undefined) removeStaleTemps(target.path);
    const made = tmp;
    if (made !== undefined) forget = onEndingSignal(() => rmSync(made, { force: true }));
    fd = openSync(tmp ?? target.path, 'w');
    for (const chunk of chunks) {
      if (typeof chunk === 'string') writeSync(fd, chunk);
      else for (let at = 0; at < chunk.length; ) at += writeSync(fd, chunk, at);
    }
    closeSync(fd);
    fd = undefined;
    if (tmp !== undefined) renameSync(tmp, target.path);
  } catch (error) {
    if (fd !== undefined) closeSync(fd);
    if (tmp !== undefined) rmSync(tmp, { force: true });
    if (error instanceof RolloutBudgetError) throw error;
    throw new RolloutBudgetError('IO_ERROR', `${path}: cannot write (${(error as NodeJS.ErrnoException).code ?? String(error)})`);
  } finally {
    forget();
  }
}
