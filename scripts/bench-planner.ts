/**
 * `npm run bench` section: the planner alone (planStep) — latency and memory at 1e3..1e6
 * candidates, and the exact references (javascript-lp-solver MILP, DP) against the greedy on
 * one 200-prompt instance. Medians of several runs.
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import seedrandom from 'seedrandom';
import { cpuLoop } from './bench-util.js';
import {
  createRegistries, exactDp, fnv1a, greedySolve, milpSolve, MonomialCurves, planStep, posteriors,
  resolvePlanOptions, snapshotOf, type Candidate, type PromptState, type SolverInput,
} from '../src/index.js';
import { checkCandidates } from '../src/plan/candidates.js';

const registries = createRegistries();

/** A realistic state: pass rates from the One-Shot-RLVR first-visit fit Beta(0.349, 0.693) (CALIBRATION.md), 1–6 visits of 8. */
function world(size: number, seed: string): { candidates: Candidate[]; states: PromptState[] } {
  const random = seedrandom(seed);
  const candidates: Candidate[] = new Array(size);
  const states: PromptState[] = [];
  for (let i = 0; i < size; i++) {
    // Parsed from JSON, as the CLI reads prompts files: flat strings, as real input has.
    const candidate = JSON.parse(`{"id":"prompt-${i}","prompt_tokens":${50 + (i % 200)},"max_tokens":3072}`) as Candidate;
    const id = JSON.parse(`"prompt-${i}"`) as string;
    candidates[i] = candidate;
    if (i % 10 === 9) continue; // 10% never seen: learned prior
    const u = random();
    const p = u < 0.36 ? random() * 0.05 : u > 0.92 ? 0.95 + random() * 0.05 : random();
    const n = 8 * (1 + Math.floor(random() * 6));
    let k = 0;
    for (let j = 0; j < n; j++) if (random() < p) k++;
    states.push({
      id, group: null, successes: k, failures: n - k, lastStep: Math.floor(random() * 20), rollouts: n, rewardSum: k,
      correctCount: k, correctTokens: k * 400, wrongCount: n - k, wrongTokens: (n - k) * 700,
    });
  }
  return { candidates, states };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/**
 * Child mode: plan once at `size` and print the peak memory growth (bytes) over the inputs,
 * after the planner call and again after reading `plan.allocations` (the objects the planner
 * leaves to its first reader).
 */
export function plannerChild(size: number): void {
  const { candidates: made, states } = world(size, `bench/${size}`);
  const candidates = checkCandidates(made); // checked once, as a reader checks a prompts file: the planner alone is timed
  const snapshot = snapshotOf(states, 20);
  (globalThis as { gc?: () => void }).gc?.();
  const base = process.memoryUsage();
  const baseRss = base.rss;
  const before = process.resourceUsage().maxRSS * 1024;
  const timer = setInterval(() => undefined, 1000);
  const grown = () => {
    const now = process.memoryUsage();
    return {
      rss: Math.max(0, process.resourceUsage().maxRSS * 1024 - Math.max(before, baseRss)),
      heap: now.heapUsed + now.arrayBuffers - (base.heapUsed + base.arrayBuffers),
    };
  };
  const plan = planStep(snapshot, candidates, { rollouts: 8 * size }, {}, registries);
  const planned = grown();
  const allocations = plan.allocations.length;
  const materialized = grown();
  clearInterval(timer);
  process.stdout.write(JSON.stringify({ peakRss: planned.rss, heapGrowth: planned.heap, materializedRss: materialized.rss, materializedHeap: materialized.heap, allocations }));
}

export function plannerBench(): void {
  const sizes = [1e3, 1e4, 1e5, 1e6];
  const defaults = resolvePlanOptions({});
  console.log(`planner: default options (policy ${defaults.policy}, value ${defaults.value}, saturation ${defaults.saturation}), rollout budget 8·N, min_n 2, max_n 64, 10% unseen prompts`);
  console.log('plan ms: the planStep call, which returns the plan with its allocations as columns (the objects: second table)');
  console.log('loop ms: a fixed arithmetic loop (bench-util.ts cpuLoop) timed after each plan, median and fastest: the machine\'s speed during the runs');
  console.log('size      plan ms (median)  runs  µs/prompt  solver ms  peak RSS growth B/prompt  heap growth B/prompt  loop ms (median, fastest)');
  const rows: { size: number; ms: number; rss: number; heap: number; materializeMs: number; materializedRss: number; materializedHeap: number; loop: number; loopFastest: number }[] = [];
  for (let k = 0; k < 5; k++) cpuLoop(); // optimized before the first size's runs (its first three calls run 1.5–5× slower)
  for (const size of sizes) {
    const { candidates: made, states } = world(size, `bench/${size}`);
    const candidates = checkCandidates(made); // checked once, as a reader checks a prompts file (planStep checks an array no reader did)
    const snapshot = snapshotOf(states, 20);
    const runs = size >= 1e6 ? 3 : size >= 1e5 ? 5 : 15;
    const times: number[] = [];
    const materializeTimes: number[] = [];
    const loopTimes: number[] = [];
    planStep(snapshot, candidates, { rollouts: 8 * size }, {}, registries).allocations; // warm-up
    for (let r = 0; r < runs; r++) {
      const t0 = performance.now();
      const plan = planStep(snapshot, candidates, { rollouts: 8 * size }, {}, registries);
      const t1 = performance.now();
      void plan.allocations; // built on first read: timed apart, so both costs show
      materializeTimes.push(performance.now() - t1);
      times.push(t1 - t0);
      loopTimes.push(cpuLoop());
    }
    // The mechanism alone: the greedy on the same posteriors and value curves.
    const options = resolvePlanOptions({ step: 21 });
    const { alpha, beta } = posteriors(snapshot, candidates, 21, options);
    const tie = Uint32Array.from(candidates, (c) => fnv1a(c.id));
    const solverTimes: number[] = [];
    for (let r = 0; r < runs; r++) {
      const input: SolverInput = {
        curves: new MonomialCurves(registries.values.get(options.value), { kind: 'beta', alpha, beta }),
        surplus: new MonomialCurves(registries.values.get(options.surplusValue), { kind: 'beta', alpha, beta }),
        tokensPerRollout: new Float64Array(size), tieBreak: tie, // no prefill weight: no fixedTokens, as the planner
        minN: 2, maxN: 64, skip: false, rollouts: 8 * size, tokens: Infinity, saturation: options.saturation,
      };
      const t0 = performance.now();
      greedySolve(input);
      solverTimes.push(performance.now() - t0);
    }
    const self = fileURLToPath(new URL('./bench.js', import.meta.url));
    const mem = spawnSync(process.execPath, ['--expose-gc', self, 'planner-child', String(size)], { encoding: 'utf8', maxBuffer: 1 << 20 });
    const m = JSON.parse(mem.stdout || '{"peakRss":NaN,"heapGrowth":NaN,"materializedRss":NaN,"materializedHeap":NaN}') as {
      peakRss: number; heapGrowth: number; materializedRss: number; materializedHeap: number;
    };
    const ms = median(times);
    const loop = median(loopTimes);
    const loopFastest = Math.min(...loopTimes);
    rows.push({
      size, ms, rss: m.peakRss / size, heap: m.heapGrowth / size,
      materializeMs: median(materializeTimes), materializedRss: m.materializedRss / size, materializedHeap: m.materializedHeap / size,
      loop, loopFastest,
    });
    console.log(`${String(size).padEnd(9)} ${ms.toFixed(1).padStart(16)}  ${String(runs).padStart(4)}  ${((ms / size) * 1000).toFixed(2).padStart(9)}  ${median(solverTimes).toFixed(1).padStart(9)}  ${(m.peakRss / size).toFixed(0).padStart(24)}  ${(m.heapGrowth / size).toFixed(0).padStart(20)}  ${`${loop.toFixed(1)}, ${loopFastest.toFixed(1)}`.padStart(25)}`);
  }
  const at = (s: number) => rows.find((r) => r.size === s)!;
  console.log(`targets: 1e4 in < 20 ms: ${at(1e4).ms.toFixed(1)} ms ${at(1e4).ms < 20 ? 'MET' : 'MISSED'}; 1e6 in < 2 s: ${(at(1e6).ms / 1000).toFixed(2)} s ${at(1e6).ms < 2000 ? 'MET' : 'MISSED'}; < 200 B/prompt (peak RSS growth at 1e6): ${at(1e6).rss.toFixed(0)} ${at(1e6).rss < 200 ? 'MET' : 'MISSED'}`);
  const fastest = Math.min(...rows.map((r) => r.loopFastest));
  console.log(`the machine during the 1e4 runs: the loop's median ${at(1e4).loop.toFixed(1)} ms, ${(at(1e4).loop / fastest).toFixed(2)}× its fastest in this section (${fastest.toFixed(1)} ms)`);

  console.log('\nreading plan.allocations (one object per prompt with p_low/p_high, built on first read: the JSON plan file and');
  console.log('callers that iterate allocations pay this; plan.columns does not), medians of the same runs:');
  console.log('size      materialize ms  µs/prompt  plan + materialize ms (sum of medians)  peak RSS growth B/prompt (plan + objects)  heap growth B/prompt');
  for (const r of rows) {
    console.log(`${String(r.size).padEnd(9)} ${r.materializeMs.toFixed(1).padStart(14)}  ${((r.materializeMs / r.size) * 1000).toFixed(2).padStart(9)}  ${(r.ms + r.materializeMs).toFixed(1).padStart(37)}  ${r.materializedRss.toFixed(0).padStart(40)}  ${r.materializedHeap.toFixed(0).padStart(20)}`);
  }

  // References on one 200-prompt instance (rollout budget; max_n 16 keeps the MILP finite).
  const { candidates, states } = world(200, 'bench/ref');
  const snapshot = snapshotOf(states, 20);
  const options = resolvePlanOptions({ step: 21 });
  const { alpha, beta } = posteriors(snapshot, candidates, 21, options);
  const input: SolverInput = {
    curves: new MonomialCurves(registries.values.get('knapsack'), { kind: 'beta', alpha, beta }),
    tokensPerRollout: new Float64Array(200), fixedTokens: new Float64Array(200),
    tieBreak: Uint32Array.from(candidates, (c) => fnv1a(c.id)),
    minN: 2, maxN: 16, skip: false, rollouts: 8 * 200, tokens: Infinity,
  };
  const time = (f: () => unknown, runs: number) => {
    const ts: number[] = [];
    let out: unknown;
    for (let r = 0; r < runs; r++) {
      const t0 = performance.now();
      out = f();
      ts.push(performance.now() - t0);
    }
    return { ms: median(ts), out };
  };
  const g = time(() => greedySolve(input), 21);
  const d = time(() => exactDp(input), 3);
  const m = time(() => milpSolve(input, 60_000), 1);
  const go = (g.out as ReturnType<typeof greedySolve>).objective;
  const dobj = (d.out as ReturnType<typeof exactDp>).objective;
  const mres = m.out as ReturnType<typeof milpSolve>;
  console.log('\nreferences, one 200-prompt instance (rollout budget 1600, min_n 2, max_n 16):');
  console.log(`greedy       ${g.ms.toFixed(3)} ms  objective ${go.toFixed(6)}`);
  console.log(`exact DP     ${d.ms.toFixed(1)} ms  objective ${dobj.toFixed(6)}  (${(d.ms / g.ms).toFixed(0)}× the greedy's time)`);
  console.log(`MILP (jslp)  ${m.ms.toFixed(0)} ms  objective ${mres.objective.toFixed(6)}  status ${mres.status}  (${(m.ms / g.ms).toFixed(0)}× the greedy's time)`);
  console.log(`greedy − DP objective: ${(go - dobj).toExponential(2)}`);
}

