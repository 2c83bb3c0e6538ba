import type { Command } from 'commander';
import seedrandom from 'seedrandom';
import { Allocator } from '../allocator.js';
import { badOption } from '../errors.js';
import { parsePrompts } from '../io/formats.js';
import { readText } from '../io/jsonl.js';
import { fixturePath } from '../io/paths.js';
import { defaultRounds } from '../plan/options.js';
import { runStepRounds, type RoundRollout } from '../plan/round-loop.js';
import type { Candidate } from '../plan/types.js';
import { visitDrawer } from '../replay/env.js';
import { HARD, hasVariance } from '../replay/metrics.js';
import type { GroupDrawer } from '../replay/types.js';
import { LoggedRun, parseVisits, type Visit } from '../replay/visits.js';
import { describe } from './catalog.js';
import type { CliIo } from './io.js';
import { roundsFlag, seedFlag, stepsFlag } from './options.js';
import { shellWord } from '../io/shell-word.js';
import { isCorrect } from '../fields.js';

export interface DemoOptions {
  readonly steps: number;
  readonly seed: number;
  /** Rounds a step is planned in (default 2, as `loop`, replay and simulate). */
  readonly rounds?: number;
}

/** One side's figures over a step or a run. */
export interface DemoFigures {
  rollouts: number;
  /** Groups with reward variance. */
  informative: number;
  /** Rollouts in groups with reward variance. */
  informativeRollouts: number;
  /** Groups of hard prompts (pooled pass rate ≤ 0.2) with at least one success. */
  hardPositives: number;
}

export interface DemoStep {
  step: number;
  prompts: number;
  planned: DemoFigures;
  logged: DemoFigures;
}

const empty = (): DemoFigures => ({ rollouts: 0, informative: 0, informativeRollouts: 0, hardPositives: 0 });

function add(into: DemoFigures, rewards: readonly number[], hard: boolean): void {
  // The replay's rules (replay/metrics.ts): informative is reward variance, a positive a correct answer.
  into.rollouts += rewards.length;
  if (hasVariance(rewards)) {
    into.informative++;
    into.informativeRollouts += rewards.length;
  }
  if (hard && rewards.some(isCorrect)) into.hardPositives++;
}

/**
 * The demo on the embedded real run (One-Shot-RLVR, fixtures/): each logged step's batch is
 * planned the way we recommend, in rounds (plan/round-loop.ts) with the run's own budget of 8
 * rollouts a prompt, by an Allocator on an in-memory state; each round's groups are drawn from
 * the logged group (without replacement; beyond 8 rollouts from the pooled pass rate of
 * neighbouring visits, a model), then the step is observed. Printed against the logged
 * uniform-8 groups themselves: rollouts, informative groups, hard-prompt positives and the
 * effective ratio (rollouts in informative groups / all rollouts). Throws BAD_OPTION when
 * more steps are asked for than the run has.
 */
export function runDemo(io: CliIo, options: DemoOptions): DemoStep[] {
  const run = new LoggedRun(parseVisits(readText(fixturePath('oneshot-rlvr-dsr-sub', 'visits.jsonl')), 'visits.jsonl'));
  if (options.steps > run.steps.length) {
    throw badOption(`steps must be at most ${run.steps.length} (the fixture's logged step count), got ${options.steps}`, ['steps']);
  }
  const promptsText = readText(fixturePath('oneshot-rlvr-dsr-sub', 'prompts.jsonl'));
  const tokens = new Map(parsePrompts(promptsText, 'prompts.jsonl').map((p) => [p.id, p.prompt_tokens]));
  const rounds = options.rounds ?? defaultRounds;
  const allocator = new Allocator({ state: ':memory:' });
  const rows: DemoStep[] = [];
  io.stdout(`One-Shot-RLVR, planned in ${rounds} round${rounds === 1 ? '' : 's'} a step vs the logged uniform-8 groups (budget: the logged rollouts)\n`);
  io.stdout('cumulative, planned / logged:\n step  rollouts         informative groups  hard positives  effective ratio\n');
  const every = Math.max(1, Math.ceil(options.steps / 20));
  const planned = empty();
  const logged = empty();
  try {
    for (const step of run.steps.slice(0, options.steps)) {
      const visits = run.at(step);
      const byId = new Map(visits.map((v) => [v.prompt_id, v]));
      const candidates: Candidate[] = visits.map((v) => ({ id: v.prompt_id, prompt_tokens: tokens.get(v.prompt_id) ?? 0 }));
      const drawers = new Map<string, GroupDrawer>();
      const drawerOf = (v: Visit) => {
        let d = drawers.get(v.prompt_id);
        if (d === undefined) drawers.set(v.prompt_id, (d = visitDrawer(v, run.pooledRate(v), seedrandom(`demo/${options.seed}/${step}/${v.prompt_id}`))));
        return d;
      };
      const done = runStepRounds(
        {
          candidates, budget: { rollouts: visits.reduce((s, v) => s + v.n, 0) }, rounds,
          plan: (r) => allocator.plan(r.candidates, r.budget, { seed: options.seed, step, roundsLeft: r.roundsLeft }),
        },
        (plan) => {
          const out: RoundRollout[] = [];
          for (const a of plan.allocations) {
            const d = drawerOf(byId.get(a.prompt_id)!);
            for (let j = 0; j < a.n; j++) out.push({ prompt_id: a.prompt_id, reward: d.next().reward });
          }
          return out;
        },
      );
      allocator.observe([...done.rewards].map(([prompt_id, rewards]) => ({ prompt_id, step, rewards })));
      const row: DemoStep = { step, prompts: visits.length, planned: empty(), logged: empty() };
      for (const v of visits) {
        const hard = run.pooledRate(v) <= HARD;
        const got = done.rewards.get(v.prompt_id);
        if (got !== undefined) add(row.planned, got, hard);
        add(row.logged, Array.from({ length: v.n }, (_, j) => (j < v.correct ? 1 : 0)), hard);
      }
      rows.push(row);
      addFigures(planned, row.planned);
      addFigures(logged, row.logged);
      if (rows.length % every === 0 || rows.length === options.steps) {
        const pair = (f: (x: DemoFigures) => string | number, width: number) => `${f(planned)} / ${f(logged)}`.padStart(width);
        io.stdout(`${String(step).padStart(5)}  ${pair((x) => x.rollouts, 15)}  ${pair((x) => x.informative, 17)}  ${pair((x) => x.hardPositives, 14)}  ${pair((x) => effective(x).toFixed(3), 15)}\n`);
      }
    }
  } finally {
    allocator.close();
  }
  io.stdout(demoTotals(rows, rounds));
  return rows;
}

function addFigures(into: DemoFigures, from: DemoFigures): void {
  into.rollouts += from.rollouts;
  into.informative += from.informative;
  into.informativeRollouts += from.informativeRollouts;
  into.hardPositives += from.hardPositives;
}

/** Rollouts in informative groups / all rollouts (Knapsack RL's effective-gradient ratio). */
const effective = (f: DemoFigures) => (f.rollouts > 0 ? f.informativeRollouts / f.rollouts : 0);

/** The totals table of a demo run, with ratios planned / logged. */
export function demoTotals(rows: readonly DemoStep[], rounds: number, visits = fixturePath('oneshot-rlvr-dsr-sub', 'visits.jsonl')): string {
  const planned = empty();
  const logged = empty();
  for (const r of rows) {
    addFigures(planned, r.planned);
    addFigures(logged, r.logged);
  }
  const ratio = (a: number, b: number) => (b > 0 ? `${(a / b).toFixed(2)}×` : '—');
  const line = (name: string, a: string, b: string, r: string) => `${name.padEnd(36)}${a.padStart(9)}${b.padStart(18)}${r.padStart(8)}\n`;
  return (
    `\ntotals over ${rows.length} steps\n` +
    line('', `${rounds} round${rounds === 1 ? '' : 's'}`, 'logged uniform-8', 'ratio') +
    line('rollouts', String(planned.rollouts), String(logged.rollouts), ratio(planned.rollouts, logged.rollouts)) +
    line('informative groups (reward variance)', String(planned.informative), String(logged.informative), ratio(planned.informative, logged.informative)) +
    line('hard-prompt positives (p ≤ 0.2)', String(planned.hardPositives), String(logged.hardPositives), ratio(planned.hardPositives, logged.hardPositives)) +
    line('effective ratio', effective(planned).toFixed(3), effective(logged).toFixed(3), ratio(effective(planned), effective(logged))) +
    'The first steps plan from the prior alone; the gains grow as the state learns the prompts. Planned groups are\n' +
    'drawn from the logged ones (exact up to 8 rollouts a prompt; beyond, a model at the pooled pass rate of\n' +
    'neighbouring visits). Every published baseline over the whole run (the README\'s `npm start`, in a clone):\n' +
    `  rollout-budget replay --log ${shellWord(visits)} --out out/replay\n`
  );
}

/** Registers `demo` on the program. */
export function registerDemoCommand(program: Command, io: CliIo): void {
  const demo = program
    .command('demo')
    .description(describe('demo'));
  stepsFlag(demo, 'steps to run, from the first (the fixture has 498)', 100);
  seedFlag(demo);
  roundsFlag(demo);
  demo.action((opts) => {
    runDemo(io, { steps: opts.steps, seed: opts.seed, rounds: opts.rounds });
  });
}
