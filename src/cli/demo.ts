import seedrandom from 'seedrandom';
import { Allocator } from '../allocator.js';
import { parsePrompts } from '../io/formats.js';
import { readText } from '../io/jsonl.js';
import { fixturePath } from '../io/paths.js';
import type { Candidate } from '../plan/types.js';
import { drawOutcomes, LoggedRun, parseVisits } from '../replay/visits.js';
import type { CliIo } from './io.js';

export interface DemoOptions {
  readonly steps: number;
  readonly seed: number;
}

export interface DemoStep {
  step: number;
  prompts: number;
  rollouts: number;
  informative: number;
  informativeUniform: number;
}

/**
 * The main job on the embedded default: the real One-Shot-RLVR run (fixtures/). Each step
 * plans the logged batch with a budget of 8 rollouts a prompt (the run's own), draws each
 * group's outcomes from the logged group (without replacement; beyond 8 from the pooled rate
 * of neighbouring visits), observes them, and compares informative groups (reward variance)
 * with the logged uniform-8 groups. State in memory.
 */
export function runDemo(io: CliIo, options: DemoOptions): DemoStep[] {
  const run = new LoggedRun(parseVisits(readText(fixturePath('oneshot-rlvr-dsr-sub', 'visits.jsonl')), 'visits.jsonl'));
  const promptsText = readText(fixturePath('oneshot-rlvr-dsr-sub', 'prompts.jsonl'));
  const tokens = new Map(parsePrompts(promptsText, 'prompts.jsonl').map((p) => [p.id, p.prompt_tokens]));
  const allocator = new Allocator({ state: ':memory:' });
  const rows: DemoStep[] = [];
  io.stdout('step  prompts  rollouts  informative groups (plan / logged uniform-8)\n');
  try {
    for (const step of run.steps.slice(0, options.steps)) {
      const visits = run.at(step);
      const candidates: Candidate[] = visits.map((v) => ({ id: v.prompt_id, prompt_tokens: tokens.get(v.prompt_id) ?? 0 }));
      const plan = allocator.plan(candidates, { rollouts: 8 * visits.length }, { seed: options.seed, step });
      const byId = new Map(visits.map((v) => [v.prompt_id, v]));
      const results = [];
      let informative = 0;
      for (const a of plan.allocations) {
        const visit = byId.get(a.prompt_id)!;
        const random = seedrandom(`demo/${options.seed}/${step}/${a.prompt_id}`);
        const rewards = drawOutcomes(visit, run.pooledRate(visit), a.n, random);
        const k = rewards.reduce((s, r) => s + r, 0);
        if (k > 0 && k < rewards.length) informative++;
        results.push({ prompt_id: a.prompt_id, step, rewards });
      }
      allocator.observe(results);
      const uniform = visits.filter((v) => v.correct > 0 && v.correct < v.n).length;
      rows.push({ step, prompts: visits.length, rollouts: plan.totals.rollouts, informative, informativeUniform: uniform });
      io.stdout(`${String(step).padStart(4)}  ${String(visits.length).padStart(7)}  ${String(plan.totals.rollouts).padStart(8)}  ${String(informative).padStart(6)} / ${uniform}\n`);
    }
  } finally {
    allocator.close();
  }
  const sum = (f: (r: DemoStep) => number) => rows.reduce((s, r) => s + f(r), 0);
  io.stdout(`total: ${sum((r) => r.rollouts)} rollouts; informative groups ${sum((r) => r.informative)} planned vs ${sum((r) => r.informativeUniform)} logged uniform-8\n`);
  return rows;
}
