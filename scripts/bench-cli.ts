/**
 * `npm run bench` section: the commands end to end, as a user runs them (a new process each
 * time, start-up included), each figure beside its physical reference measured in the same
 * run: reading the same bytes and JSON.parse of every line (a reader's floor), writing the
 * same bytes (a writer's floor), `node -e 0` (a command's start). Peak memory is the child's
 * maximum resident set. Medians of several runs; the ratio column is time / reference.
 */
import { rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { claimReference } from './bench-claims.js';
import { benchDir, promptsFile, replayLog, resultsFile, warmState } from './bench-inputs.js';
import { CLI, fmtMB, fmtS, fmtX, median, medianRun, nodeStartReference, readReference, rmSqlite as rm, runNode, table, writeReference } from './bench-util.js';

/** A trainer's step: the prompts planned at once from a large pool. */
const STEP = 1024;

/**
 * `--help` and a 100-prompt plan (fresh state each run) against `node -e 0`, the three taking
 * turns run by run (until 2026-11-27 each ran its 9 runs in a block: a spell of this machine
 * that began or ended between two blocks moved "ours beyond node").
 */
export async function startupBench(runs = 9): Promise<{ help: number; plan: number; node: number }> {
  const dir = benchDir();
  const prompts = await promptsFile(100);
  const state = join(dir, 'start.db');
  rm(state);
  const times = { node: [] as number[], help: [] as number[], plan: [] as number[] };
  for (let r = 0; r < runs; r++) {
    times.node.push(nodeStartReference(1));
    // Bare, as a user runs them: no memory hook (its preload is the bench's cost, not the CLI's).
    times.help.push(runNode([CLI, '--help'], { rss: false }).seconds);
    rm(state);
    times.plan.push(runNode([CLI, 'plan', '--prompts', prompts, '--state', state, '--budget-rollouts', '800', '--out', join(dir, 'start-plan.json')], { rss: false }).seconds);
  }
  const [node, help, plan] = [median(times.node), median(times.help), median(times.plan)];
  console.log(`\nstart-up (median of ${runs}; target < 150 ms each):`);
  table(['command', 'time', 'node -e 0', 'ours beyond node'], [
    ['rollout-budget --help', fmtS(help), fmtS(node), fmtS(help - node)],
    ['plan, 100 prompts', fmtS(plan), fmtS(node), fmtS(plan - node)],
  ]);
  rm(state);
  return { help, plan, node };
}

/**
 * `order`: the prompts file in the warm state's row order (`rows`), shuffled (bench-inputs.ts
 * promptsFile), or a step: the first 1,024 of the shuffled prompts, planned on the whole warm
 * state (a trainer's step drawn from a large pool).
 */
export interface PlanFigure {
  size: number; state: 'fresh' | 'warm'; order: 'rows' | 'shuffled' | 'step'; format: string; seconds: number; peakRss: number; read: number; write: number; bytes: number;
  /** Each run's seconds, in the order run: run r of every configuration came in the same turn, so two configurations compare run by run. */
  runs: readonly number[];
}

/**
 * `plan` on 10⁴..10⁶ prompts, fresh and warm state, budget 8·N, default options. The warm
 * state is also planned with the prompts in a shuffled order: a trainer's sampler does not give
 * a step's prompts in the order the state first saw them, and a lookup out of the rows' order
 * meets the cache misses that one in order does not.
 */
export async function planBench(sizes: readonly number[]): Promise<PlanFigure[]> {
  const dir = benchDir();
  const out: PlanFigure[] = [];
  const rows: string[][] = [];
  for (const size of sizes) {
    const prompts = await promptsFile(size);
    const shuffled = await promptsFile(size, true);
    const step = await promptsFile(size, true, STEP);
    const read = readReference(prompts);
    const stepRead = readReference(step);
    const warm = warmState(size);
    const runs = size >= 1e6 ? 3 : 5;
    const configs = ([['fresh', 'json', 'rows'], ['warm', 'json', 'rows'], ['warm', 'json', 'shuffled'], ['warm', 'jsonl', 'rows'], ['warm', 'json', 'step']] as const)
      .filter(([, format, order]) => (format === 'json' || size >= 1e6) && (order !== 'step' || size > STEP));
    const fresh = join(dir, 'fresh.db');
    const fileOf = (state: string, format: string, order: string) => join(dir, `plan-${size}-${state}-${order}.${format}`);
    // The configurations take turns, run by run: a machine that slows down or speeds up
    // part-way (they do, by a third, over minutes) then moves every column alike, and the
    // comparisons between them (jsonl against json, warm against fresh) stay fair.
    const times = configs.map(() => [] as number[]);
    const peaks = configs.map(() => 0);
    for (let r = 0; r < runs; r++) {
      configs.forEach(([state, format, order], c) => {
        rm(fresh);
        rmSync(fileOf(state, format, order), { force: true });
        const run = runNode([CLI, 'plan', '--prompts', order === 'rows' ? prompts : order === 'step' ? step : shuffled, '--state', state === 'fresh' ? fresh : warm, '--budget-rollouts', String(8 * (order === 'step' ? STEP : size)), '--format', format, '--out', fileOf(state, format, order)]);
        times[c]!.push(run.seconds);
        peaks[c] = Math.max(peaks[c]!, run.peakRss);
      });
    }
    configs.forEach(([state, format, order], c) => {
      const file = fileOf(state, format, order);
      const bytes = statSync(file).size;
      const write = writeReference(dir, bytes);
      rmSync(file, { force: true });
      const r = { seconds: median(times[c]!), peakRss: peaks[c]! };
      const input = order === 'step' ? stepRead : read;
      out.push({ size, state, order, format, seconds: r.seconds, peakRss: r.peakRss, read: input, write, bytes, runs: times[c]! });
      rows.push([String(size), state, order === 'step' ? `a step of ${STEP}` : order === 'shuffled' ? 'shuffled' : state === 'fresh' ? '' : 'as rows', format, fmtS(r.seconds), fmtMB(r.peakRss), fmtS(input), fmtS(write), fmtS(input + write), fmtX(r.seconds, input + write), `${(bytes / 1e6).toFixed(1)} MB`]);
    });
    rm(fresh);
    rm(warm);
    rmSync(prompts, { force: true });
    rmSync(shuffled, { force: true });
    rmSync(step, { force: true });
  }
  console.log('\nplan end to end (rollout budget 8·N, default options; warm: 90% of prompts seen 8–48 times; median of 5, 3 at 10⁶, the configurations taking turns run by run):');
  console.log(`order: the prompts file in the order of the warm state's rows (as rows), or the same lines shuffled, as a trainer's sampler gives them; a step of ${STEP}: the first ${STEP} shuffled prompts, budget 8·${STEP}, on the whole warm state`);
  console.log('references: read = read + JSON.parse every line of the prompts file; write = write the plan\'s bytes; ratio = time / (read + write)');
  table(['prompts', 'state', 'order', 'format', 'time', 'peak RSS', 'read', 'write', 'reference', 'ratio', 'plan file'], rows);
  return out;
}

export interface ObserveFigure {
  rollouts: number; ids: boolean; backend: string; seconds: number; peakRss: number; read: number;
  /** SQLite with ids at 10⁶: the claimed keys' inserts alone (bench-claims.ts), as observe orders them and all sorted. */
  claims?: { chunked: number; sorted: number };
}

/** `observe` of 10⁴..10⁶ rollouts (over rollouts/10 prompts) into a new SQLite state, and PostgreSQL when RB_PG_URL is set. */
export async function observeBench(sizes: readonly number[], pgUrl: string | undefined, freshPg: () => Promise<{ url: string; drop: () => Promise<void> }>): Promise<ObserveFigure[]> {
  const dir = benchDir();
  const out: ObserveFigure[] = [];
  const rows: string[][] = [];
  const notes: string[] = [];
  for (const rollouts of sizes) {
    for (const ids of [false, true]) {
      const file = await resultsFile(rollouts, ids);
      const read = readReference(file);
      const runs = rollouts >= 1e6 ? 3 : 5;
      const state = join(dir, 'observe.db');
      const r = medianRun([CLI, 'observe', '--results', file, '--state', state], runs, () => rm(state));
      rm(state);
      const claims = ids && rollouts >= 1e6 ? claimReference(file, dir) : undefined;
      if (claims !== undefined) {
        const without = out.find((x) => x.rollouts === rollouts && !x.ids && x.backend === 'sqlite');
        notes.push(`claimed keys alone (${rollouts.toLocaleString('en-US')} ids into a new state's claimed-keys table, one transaction, 500 a statement; bench-claims.ts): ` +
          `as observe orders them (each 512 kB piece sorted) ${fmtS(claims.chunked)}, all sorted at once ${fmtS(claims.sorted)}; observe with ids − without: ${without === undefined ? '—' : fmtS(r.seconds - without.seconds)}`);
      }
      out.push({ rollouts, ids, backend: 'sqlite', seconds: r.seconds, peakRss: r.peakRss, read, ...(claims === undefined ? {} : { claims }) });
      rows.push([String(rollouts), ids ? 'yes' : 'no', 'SQLite', fmtS(r.seconds), fmtMB(r.peakRss), fmtS(read), fmtX(r.seconds, read)]);
      if (pgUrl !== undefined && rollouts >= 1e5) {
        const times: number[] = [];
        let peak = 0;
        for (let k = 0; k < 2; k++) {
          const schema = await freshPg();
          try {
            const run = runNode([CLI, 'observe', '--results', file, '--state', schema.url]);
            times.push(run.seconds);
            peak = Math.max(peak, run.peakRss);
          } finally {
            await schema.drop();
          }
        }
        out.push({ rollouts, ids, backend: 'postgres', seconds: median(times), peakRss: peak, read });
        rows.push([String(rollouts), ids ? 'yes' : 'no', 'PostgreSQL', fmtS(median(times)), fmtMB(peak), fmtS(read), fmtX(median(times), read)]);
      }
      rmSync(file, { force: true });
    }
  }
  console.log('\nobserve end to end (one rollout a line over rollouts/10 prompts, into a new state; median of 5, 3 at 10⁶, PostgreSQL 2; targets at 10⁶: SQLite < 2 s, PostgreSQL < 10 s, peak < 300 MB):');
  console.log('reference: read + JSON.parse every line of the results file; ratio = time / reference');
  table(['rollouts', 'rollout_id', 'state', 'time', 'peak RSS', 'reference', 'ratio'], rows);
  for (const note of notes) console.log(note);
  return out;
}

export interface ReplayFigure { rollouts: number; format: string; pool: number | undefined; seconds: number; peakRss: number; read: number }

/**
 * `replay --policies uniform` of logs of 10⁴..10⁷ rollouts, results and verl formats: first
 * with a pool a third the size of all visits (the distinct prompts grow with the log), then at
 * `fixedSizes` with a fixed pool of `pool` prompts, so the per-prompt state is the same and
 * only the log's length changes (a replay's memory should not).
 */
export async function replayBench(sizes: readonly number[], fixedSizes: readonly number[], pool: number): Promise<ReplayFigure[]> {
  const dir = benchDir();
  const out: ReplayFigure[] = [];
  const rows: string[][] = [];
  const cases = [...sizes.map((rollouts) => ({ rollouts, pool: undefined })), ...fixedSizes.map((rollouts) => ({ rollouts, pool }))];
  for (const c of cases) {
    for (const format of ['results', 'verl'] as const) {
      const log = await replayLog(c.rollouts, format, c.pool);
      const read = readReference(log, c.rollouts >= 1e7 ? 1 : 3);
      const runs = c.rollouts >= 1e7 ? 1 : c.rollouts >= 1e6 ? 3 : 5;
      const report = join(dir, 'replay-out');
      const r = medianRun([CLI, 'replay', '--log', log, '--policies', 'uniform', '--out', report, '--quiet'], runs, () => rmSync(report, { recursive: true, force: true }));
      rmSync(report, { recursive: true, force: true });
      out.push({ rollouts: c.rollouts, format, pool: c.pool, seconds: r.seconds, peakRss: r.peakRss, read });
      const poolLabel = c.pool === undefined ? 'a third of visits' : c.pool.toLocaleString('en-US');
      rows.push([String(c.rollouts), format, poolLabel, fmtS(r.seconds), fmtMB(r.peakRss), `${(statSync(log).size / 1e6).toFixed(0)} MB`, fmtS(read), fmtX(r.seconds, read)]);
      rmSync(log, { force: true });
    }
  }
  console.log('\nreplay end to end, uniform policy (steps of 1,024 prompts × 8 rollouts; median of 5, 3 at 10⁶, 1 at 10⁷; target at 10⁷: < 60 s, memory independent of the log\'s length):');
  console.log('pool: the distinct prompts the log draws from; reference: read + JSON.parse every line of the log; ratio = time / reference');
  table(['rollouts', 'format', 'pool', 'time', 'peak RSS', 'log', 'reference', 'ratio'], rows);
  return out;
}
