/**
 * Inputs of `npm run bench`, generated under .tmp/bench (removed at the end): prompts files,
 * results files (with and without rollout ids), replay logs (results and verl dumps), and
 * warm states written straight into SQLite. Deterministic (a fixed LCG), so every run
 * measures the same bytes. The difficulty mix is One-Shot-RLVR's (CALIBRATION.md): 36% of
 * prompts nearly never solved, 8% nearly always, the rest uniform.
 */
import { createWriteStream, mkdirSync } from 'node:fs';
import { once } from 'node:events';
import { join } from 'node:path';
import { SqliteStore } from '../src/index.js';
import { ROOT } from './bench-util.js';

export const BENCH_DIR = join(ROOT, '.tmp', 'bench');

export function benchDir(): string {
  mkdirSync(BENCH_DIR, { recursive: true });
  return BENCH_DIR;
}

/** A small deterministic generator (numbers in [0, 1)). */
function lcg(seed: number): () => number {
  let x = seed >>> 0;
  return () => {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0;
    return x / 4294967296;
  };
}

/** A prompt's pass rate from its index: the One-Shot-RLVR mix. */
export function passRate(i: number): number {
  const u = ((Math.imul(i + 1, 2654435761) >>> 0) % 10_000) / 10_000;
  return u < 0.36 ? u / 7.2 : u > 0.92 ? 0.95 + (u - 0.92) / 1.6 : (u - 0.36) / 0.56;
}

/** Writes lines from a generator to a file, in 1 MB pieces. */
async function writeLines(path: string, lines: Iterable<string>): Promise<string> {
  const out = createWriteStream(path);
  let buffer = '';
  for (const line of lines) {
    buffer += line;
    if (buffer.length >= 1 << 20) {
      if (!out.write(buffer)) await once(out, 'drain');
      buffer = '';
    }
  }
  out.end(buffer);
  await once(out, 'finish');
  return path;
}

/**
 * `size` prompts as a user's prompts file: id, prompt_tokens, max_tokens. In the order of
 * their numbers, which is the order of warmState's rows; `shuffled`: the same lines in a
 * seeded random order, as a trainer's sampler gives a step's prompts, so that a plan meets a
 * warm state's rows out of their order. `first`: only the first lines of that order (a step's
 * prompts drawn from the pool).
 */
export function promptsFile(size: number, shuffled = false, first = size): Promise<string> {
  const order = Array.from({ length: size }, (_, i) => i);
  if (shuffled) {
    const random = lcg(size + 7);
    for (let i = size - 1; i > 0; i--) {
      const j = Math.floor(random() * (i + 1));
      [order[i], order[j]] = [order[j]!, order[i]!];
    }
  }
  return writeLines(join(benchDir(), `prompts-${size}${shuffled ? '-shuffled' : ''}${first < size ? `-first-${first}` : ''}.jsonl`), (function* () {
    for (const i of order.slice(0, first)) yield `{"id":"prompt-${i}","prompt_tokens":${50 + (i % 200)},"max_tokens":3072}\n`;
  })());
}

/** `rollouts` rollouts, one a line, over rollouts/10 prompts, one step; with ids (`step/prompt#j`) or without. */
export function resultsFile(rollouts: number, withIds: boolean): Promise<string> {
  const random = lcg(rollouts);
  const prompts = Math.max(1, Math.floor(rollouts / 10));
  return writeLines(join(benchDir(), `results-${rollouts}${withIds ? '-ids' : ''}.jsonl`), (function* () {
    for (let i = 0; i < rollouts; i++) {
      const p = i % prompts;
      const reward = random() < passRate(p) ? 1 : 0;
      const id = withIds ? `,"rollout_id":"0/prompt-${p}#${Math.floor(i / prompts)}"` : '';
      yield `{"prompt_id":"prompt-${p}","step":0,"reward":${reward},"tokens":${200 + Math.floor(random() * 3000)}${id}}\n`;
    }
  })());
}

/**
 * A logged run for replay: steps of 1,024 prompts × 8 rollouts from a pool of `pool` prompts,
 * by default a third the size of all visits (each prompt seen about three times, so the
 * distinct prompts grow with the log), as observe results or as verl dumps
 * (`{input, output, score, step}`, short texts).
 */
export function replayLog(rollouts: number, format: 'results' | 'verl', pool?: number): Promise<string> {
  const random = lcg(rollouts + 7);
  const batch = 1024;
  const steps = Math.ceil(rollouts / (8 * batch));
  const size = pool ?? Math.max(batch, Math.floor((steps * batch) / 3));
  const name = `log-${format}-${rollouts}${pool === undefined ? '' : `-pool-${pool}`}.jsonl`;
  return writeLines(join(benchDir(), name), (function* () {
    let written = 0;
    for (let s = 0; s < steps && written < rollouts; s++) {
      for (let b = 0; b < batch && written < rollouts; b++) {
        const p = (s * batch + b) % size;
        for (let j = 0; j < 8 && written < rollouts; j++, written++) {
          const reward = random() < passRate(p) ? 1 : 0;
          if (format === 'results') yield `{"prompt_id":"p${p}","step":${s},"reward":${reward},"tokens":${200 + Math.floor(random() * 3000)}}\n`;
          else yield `{"input":"Problem ${p}: find every x with x^2 = ${p}.","output":"The answer is ${Math.floor(random() * 1000)}.","score":${reward}.0,"step":${s}}\n`;
        }
      }
    }
  })());
}

/**
 * A SQLite state of `size` prompts written straight into the tables (observing them would
 * take longer than the plans measured): 90% seen 8–48 times at steps 0–19, the rest unseen,
 * names `prompt-<i>` (the prompts files' ids). The pooled rows are built when it is opened.
 */
export function warmState(size: number, name = `warm-${size}.db`, dir = benchDir()): string {
  const path = join(dir, name);
  const store = new SqliteStore(path);
  store.close();
  const random = lcg(size + 3);
  const db = new (SqliteStore.driver())(path);
  const insert = db.prepare('INSERT OR REPLACE INTO prompts (id, grp, successes, failures, last_step, rollouts, reward_sum, correct_count, correct_tokens, wrong_count, wrong_tokens) VALUES (?, NULL, ?, ?, ?, ?, ?, ?, ?, ?, ?)');
  db.transaction(() => {
    for (let i = 0; i < size; i++) {
      if (i % 10 === 9) continue;
      const n = 8 * (1 + Math.floor(random() * 6));
      let k = 0;
      for (let j = 0; j < n; j++) if (random() < passRate(i)) k++;
      insert.run(`prompt-${i}`, k, n - k, Math.floor(random() * 20), n, k, k, k * 400, n - k, (n - k) * 700);
    }
    db.prepare("INSERT OR REPLACE INTO meta (key, value) VALUES ('last_step', '19')").run();
    db.prepare('DELETE FROM pooled').run();
    db.prepare("DELETE FROM meta WHERE key = 'pooled_version'").run();
  })();
  db.close();
  new SqliteStore(path).close(); // builds the pooled rows
  return path;
}
