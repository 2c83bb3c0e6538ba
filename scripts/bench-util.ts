/**
 * Shared pieces of `npm run bench`: medians, child processes with their peak memory, the
 * physical references (reading and parsing the same bytes, writing the same bytes), and
 * the table printer. Every figure of one run comes from this one machine, in one run.
 */
import { spawn, spawnSync } from 'node:child_process';
import { closeSync, openSync, readFileSync, rmSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { lineChunks } from '../src/index.js';

/** Removes a SQLite file and its WAL and shared-memory files, where they exist. */
export const rmSqlite = (path: string) => {
  for (const suffix of ['', '-wal', '-shm']) rmSync(`${path}${suffix}`, { force: true });
};

export const median = (xs: readonly number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

export const ROOT = join(fileURLToPath(import.meta.url), '..', '..', '..');
export const CLI = join(ROOT, 'bin', 'rollout-budget.js');
/** Preloaded (-r) into a measured child: prints its peak RSS at exit (bench-rss.cts). */
const RSS_HOOK = join(fileURLToPath(import.meta.url), '..', 'bench-rss.cjs');

export interface ChildRun {
  /** Wall-clock seconds from spawn to exit (start-up included, as a user sees it). */
  readonly seconds: number;
  /** Peak resident memory of the child, bytes. */
  readonly peakRss: number;
  readonly stdout: string;
}

/**
 * Runs `node [args]` (the CLI when args start with it), timing it and reading its peak RSS;
 * `rss: false` runs it bare (no hook: the start-up figures), its peakRss then NaN.
 */
export function runNode(args: readonly string[], options: { cwd?: string; input?: string; env?: NodeJS.ProcessEnv; rss?: boolean } = {}): ChildRun {
  const t0 = performance.now();
  const run = spawnSync(process.execPath, [...(options.rss === false ? [] : ['-r', RSS_HOOK]), ...args], {
    encoding: 'utf8', maxBuffer: 1 << 28, ...(options.cwd === undefined ? {} : { cwd: options.cwd }),
    ...(options.input === undefined ? {} : { input: options.input }), env: { ...process.env, ...options.env },
  });
  const seconds = (performance.now() - t0) / 1000;
  if (run.status !== 0) throw new Error(`node ${args.join(' ')}: exit ${run.status}\n${run.stderr}`);
  const m = /BENCH_RSS (\d+)/.exec(run.stderr);
  return { seconds, peakRss: m === null ? NaN : Number(m[1]), stdout: run.stdout };
}

/** The same, without waiting on this thread (a service in the background). */
export function spawnNode(args: readonly string[], env: NodeJS.ProcessEnv = {}) {
  return spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } });
}

/** Median seconds and the largest peak RSS over `runs` runs of `args`; `before` runs first each time (untimed). */
export function medianRun(args: readonly string[], runs: number, before?: () => void, options?: Parameters<typeof runNode>[1]): { seconds: number; peakRss: number; all: number[] } {
  const times: number[] = [];
  let peak = 0;
  for (let r = 0; r < runs; r++) {
    before?.();
    const run = runNode(args, options);
    times.push(run.seconds);
    peak = Math.max(peak, run.peakRss);
  }
  return { seconds: median(times), peakRss: peak, all: times };
}

/**
 * The physical reference of reading a JSONL file: read the bytes, decode them, JSON.parse
 * every line, in this process (median of `runs`). What any reader of the format must do.
 */
export function readReference(path: string, runs = 3): number {
  const times: number[] = [];
  for (let r = 0; r < runs; r++) {
    const t0 = performance.now();
    let count = 0;
    // In 4 MB pieces of whole lines (a 1.3 GB log is longer than a string may be).
    for (const { text } of lineChunks(path, path)) {
      let start = 0;
      while (start < text.length) {
        let end = text.indexOf('\n', start);
        if (end < 0) end = text.length;
        if (end > start) {
          JSON.parse(text.slice(start, end));
          count++;
        }
        start = end + 1;
      }
    }
    times.push((performance.now() - t0) / 1000);
    if (count === 0) throw new Error(`${path}: empty`);
  }
  return median(times);
}

/** The physical reference of writing `bytes` bytes to a file in 1 MB pieces (median of `runs`). */
export function writeReference(dir: string, bytes: number, runs = 3): number {
  const piece = Buffer.alloc(1 << 20, 0x61);
  const times: number[] = [];
  for (let r = 0; r < runs; r++) {
    const path = join(dir, `write-ref-${r}`);
    const t0 = performance.now();
    const fd = openSync(path, 'w');
    for (let left = bytes; left > 0; left -= piece.length) writeSync(fd, piece, 0, Math.min(piece.length, left));
    closeSync(fd);
    times.push((performance.now() - t0) / 1000);
    rmSync(path, { force: true });
  }
  return median(times);
}

/** Node's own start: `node -e 0` (median of `runs`), the floor of any command's start. */
export function nodeStartReference(runs: number): number {
  const times: number[] = [];
  for (let r = 0; r < runs; r++) {
    const t0 = performance.now();
    spawnSync(process.execPath, ['-e', '0']);
    times.push((performance.now() - t0) / 1000);
  }
  return median(times);
}

/** The values a `cpuLoop` sums over: fixed, so every call does the same work. */
const LOOP_VALUES = Float64Array.from({ length: 1 << 14 }, (_, i) => 0.5 + (i % 97) / 97);

/**
 * A fixed arithmetic loop (655,360 logarithms, no allocation), in ms: this machine's speed at
 * the moment, timed between a section's runs. On the shared 2-core machine its time moved by
 * up to 2.7× within minutes, staying fast or slow for seconds at a time, whatever the other
 * core did (docs/performance.md, seventh round). Its first three calls in a process are slower
 * while V8 optimizes it.
 */
export function cpuLoop(): number {
  const t0 = performance.now();
  let sum = 0;
  for (let k = 0; k < 40; k++) for (let i = 0; i < LOOP_VALUES.length; i++) sum += Math.log(LOOP_VALUES[i]! + k);
  const ms = performance.now() - t0;
  if (sum !== sum) throw new Error('cpuLoop: NaN'); // uses the sum, so the loop is not dropped
  return ms;
}

export const fmtS = (s: number) => (s >= 10 ? `${s.toFixed(1)} s` : s >= 1 ? `${s.toFixed(2)} s` : `${(s * 1000).toFixed(0)} ms`);
export const fmtMB = (b: number) => (Number.isFinite(b) ? `${(b / 1e6).toFixed(0)} MB` : '—');
export const fmtX = (a: number, b: number) => (b > 0 ? `${(a / b).toFixed(1)}×` : '—');

/** Prints rows as a fixed-width table under a header. */
export function table(header: readonly string[], rows: readonly (readonly string[])[]): void {
  const widths = header.map((h, k) => Math.max(h.length, ...rows.map((r) => r[k]!.length)));
  const line = (cells: readonly string[]) => cells.map((c, k) => (k === 0 ? c.padEnd(widths[k]!) : c.padStart(widths[k]!))).join('  ');
  console.log(line(header));
  for (const r of rows) console.log(line(r));
}

/** Load average of the machine now (1, 5, 15 min), for the record. */
export function loadAverage(): string {
  try {
    return readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(', ');
  } catch {
    return 'unknown';
  }
}
