import { Command, InvalidArgumentError, Option } from 'commander';
import { RolloutBudgetError, badInput, badOption, withFieldNames } from '../errors.js';
import { readText } from '../io/jsonl.js';
import { defaultPlanOptions, resolvePlanOptions } from '../plan/options.js';
import { MAX_STEP } from '../posterior/decay.js';
import { replayStreams, runPolicies, type ReplayStream } from '../replay/engine.js';
import { replayEnvironment } from '../replay/env.js';
import { logFormats, readLog, type LogFormat } from '../replay/log.js';
import { baselineNames, createReplayPolicyRegistry, defaultPolicyList } from '../replay/policies.js';
import { parseScenario } from '../simulate/scenario.js';
import { simulatedEnvironment } from '../simulate/world.js';
import { describe } from './catalog.js';
import { rereadable, type CliIo } from './io.js';
import { boundFlags, budgetFlags, budgetFrom, roundsFlag, seedFlag, stepsFlag } from './options.js';
import { freshCapArg, intArg } from './parse.js';
import { createProgress } from './progress.js';
import { checkReportFolder, checkTokenBudget, commandLine, emitReport, runSeeds, seedRange, seedsOf } from './report-run.js';
import type { SeedRun } from '../report/series.js';
import { defaultDetail, replaySettings, simulateSettings } from './report-settings.js';

/** `a:b` (inclusive; either side may be left out) → [from, to]. */
export function stepRange(value: string): [number, number] {
  const m = /^\s*(\d*)\s*:\s*(\d*)\s*$/.exec(value);
  if (m === null || (m[1] === '' && m[2] === '')) throw new InvalidArgumentError(`must be a step range "a:b" (inclusive, e.g. 0:99 or 100:), got "${value}"`);
  const from = m[1] === '' ? 0 : Number(m[1]);
  const to = m[2] === '' ? Number.MAX_SAFE_INTEGER : Number(m[2]);
  if (to < from) throw new InvalidArgumentError(`the step range "${value}" ends before it starts`);
  return [from, to];
}

/** `--steps` of replay: a count (the first n logged steps), or the older `a:b` range. */
function stepsOrRange(value: string): number | [number, number] {
  return /^\s*\d+\s*$/.test(value) ? intArg(1)(value) : stepRange(value);
}

/** The logged steps `--steps` (count or range) and `--step-range` select. */
function selectSteps(all: readonly number[], steps: number | [number, number] | undefined, range: [number, number] | undefined): number[] {
  if (steps !== undefined && range !== undefined) throw badOption('give --steps or --step-range, not both');
  if (typeof steps === 'number') {
    if (steps > all.length) throw badOption(`--steps must be at most ${all.length} (the log's steps), got ${steps}`);
    return all.slice(0, steps);
  }
  const r = range ?? steps;
  const out = r === undefined ? [...all] : all.filter((s) => s >= r[0] && s <= r[1]);
  if (out.length === 0) throw badOption(`no logged steps in ${r === undefined ? 'the log' : `${r[0]}:${r[1]}`}; the log has steps ${all[0]}..${all.at(-1)}`);
  return out;
}

/**
 * A warning when a step range's end reaches past the log's last step (`300:498` on a log of
 * steps 0..497 ran 300..497 without a word; steps count from 0). An open end (`100:`) is the
 * log's own end, and a start before the log's first step is not said (`:3` reads as 0:3, and
 * verl's dumps start at step 1).
 */
function clippedRange(all: readonly number[], range: [number, number] | undefined, steps: readonly number[]): string | undefined {
  if (range === undefined || range[1] === Number.MAX_SAFE_INTEGER) return undefined;
  const first = all[0]!;
  const last = all.at(-1)!;
  if (range[1] <= last) return undefined;
  return `the step range ${range[0]}:${range[1]} reaches past the log's steps, ${first}..${last}: replayed steps ${steps[0]}..${steps.at(-1)}`;
}

const ourRoundsHelp = 'our policies plan and generate each step in this many rounds (later rounds top up groups by what they showed)';

/**
 * `--skip` / `--no-skip` of replay and simulate: whether our policies may give a prompt 0
 * rollouts; and `--fresh-cap`, the first round's bound on new prompts (plan/fresh-cap.ts).
 */
function ourPlanFlags(cmd: Command): Command {
  return cmd
    .option('--skip', 'our policies may give a prompt 0 rollouts (default: on under a token budget, off otherwise)')
    .option('--no-skip', 'our policies give every prompt at least --min-n, also under a token budget')
    .addOption(new Option('--fresh-cap <c>', 'our policies\' bound on a prompt new to the state in a step\'s first round: ⌈c × the round\'s rollouts ÷ its prompts⌉ (plan --fresh-cap; 0: none)').default(defaultPlanOptions.freshCap).argParser(freshCapArg));
}

/** Options for our planner's policies (EngineOptions.plan). */
function ourPlanOptions(opts: { rounds: number; skip?: boolean; freshCap: number }): Record<string, unknown> {
  return { rounds: opts.rounds, ...(opts.skip === undefined ? {} : { skip: opts.skip }), freshCap: opts.freshCap };
}

/**
 * --min-n and --max-n, checked before a log or scenario is read: max_n below min_n, and, when a
 * policy of ours runs, our planner's options (a min_n above 4096 was refused after reading the
 * whole log: 4.6 s for a piped one). The baselines take any bounds.
 */
function checkOurBounds(opts: { minN: number; maxN: number; policies: string[]; rounds: number; skip?: boolean; freshCap: number }): void {
  if (opts.maxN < opts.minN) throw badOption(`max_n must be ≥ min_n ${opts.minN}, got ${opts.maxN}`, ['max_n', 'min_n']);
  if (opts.policies.some((p) => !(baselineNames as readonly string[]).includes(p))) {
    const { rounds: _rounds, ...plan } = ourPlanOptions(opts); // rounds is the engine's, not a plan option
    resolvePlanOptions({ ...plan, minN: opts.minN, maxN: opts.maxN });
  }
}

function policyList(value: string): string[] {
  const names = value.split(',').map((s) => s.trim()).filter((s) => s !== '');
  if (names.length === 0) throw new InvalidArgumentError(`must be a comma-separated list of policies, got "${value}"`);
  return names;
}

/** Replay notes shown in summary.md and report.html. */
export const replayNotes = [
  'Each policy plans a step only from the groups it generated itself at earlier steps; its groups are then scored against the step\'s logged outcomes.',
  'Up to the logged group size, outcomes are drawn without replacement from the logged group (exact). Beyond it they are Bernoulli draws at the prompt\'s pass rate pooled over the visit and its neighbouring visits (one before, one after): a model, not a record.',
  '"Hard" prompts have that pooled pass rate ≤ 0.2. Policies that refill or select from a pool (dapo, greso, mopps) consume later batches\' prompts, which are then missing from those batches for them (--stream consumed, the default); with --stream shared every policy gets every step\'s whole batch.',
];

/**
 * Checks `--policies` before anything is read: each name known to `command` (oracle only to
 * simulate, which knows the true pass rates), none twice (a policy named twice ran twice: two
 * "our default" rows, the legend twice over).
 */
function resolvePolicies(names: readonly string[], command: 'replay' | 'simulate'): void {
  const registry = createReplayPolicyRegistry();
  const known = registry.names().filter((n) => command === 'simulate' || registry.get(n).needsTruth !== true);
  const seen = new Set<string>();
  for (const n of names) {
    if (!registry.has(n)) throw badOption(`--policies: unknown policy "${n}"; ${command} takes ${known.join(', ')}`, ['policies']);
    if (seen.has(n)) throw badOption(`--policies: "${n}" is named twice; name each policy once`, ['policies']);
    seen.add(n);
  }
}

/**
 * `simulate` has no budget flags: the scenario sets the budgets, so an error naming them (an
 * infeasible budget under --no-skip) names the scenario's fields, not --budget-rollouts.
 */
function scenarioBudgetNames<T>(run: () => T): T {
  try {
    return run();
  } catch (error) {
    if (!(error instanceof RolloutBudgetError)) throw error;
    throw withFieldNames(error, { budget_rollouts: 'the scenario\'s budget.rollouts_per_prompt', budget_tokens: 'the scenario\'s budget.tokens_per_prompt' });
  }
}

/**
 * A warning for each policy that generated nothing at any step of some seed's run: its table
 * row reads 0 (the headline 0.00×), with no other sign of why. Our planner plans nothing when
 * no prompt's min_n rollouts (or their expected tokens) fit a step's budget.
 */
function idleWarnings(runs: readonly SeedRun[], budget: string): string[] {
  const idle = new Map<string, number[]>();
  for (const { seed, results } of runs) {
    for (const r of results) if (r.totals.steps > 0 && r.totals.rollouts === 0) idle.set(r.name, [...(idle.get(r.name) ?? []), seed]);
  }
  return [...idle].map(([name, seeds]) => {
    const which = runs.length === 1 ? '' : seeds.length === runs.length ? ' at every seed' : ` at seed${seeds.length === 1 ? '' : 's'} ${seeds.join(', ')}`;
    return `${name} generated no rollout at any step${which}: no prompt's min_n rollouts (or their expected tokens) fit a step's budget; raise ${budget} or lower --min-n`;
  });
}

/** Registers `replay` and `simulate` on the program. */
export function registerReplayCommands(program: Command, io: CliIo): void {
  const replay = program
    .command('replay')
    .description(describe('replay'))
    .requiredOption('--log <path>', 'the logged run: a JSONL file (- for stdin), or a folder of verl rollout dumps')
    .addOption(new Option('--format <name>', 'log format').choices(['auto', ...logFormats]).default('auto'))
    .addOption(new Option('--policies <list>', 'comma-separated policies: the baselines, and ours by posterior policy (bayes, thompson, mean)').default(defaultPolicyList(), defaultPolicyList().join(',')).argParser(policyList));
  budgetFlags(replay, { rollouts: 'rollouts per step (default: the step\'s logged rollouts)', tokens: 'generated tokens per step (default: none)' }, 1);
  boundFlags(replay);
  replay
    .addOption(new Option('--steps <n|a:b>', 'the first n logged steps; a:b, the older spelling of --step-range, still works').argParser(stepsOrRange))
    .addOption(new Option('--step-range <a:b>', 'only logged steps a..b (inclusive)').argParser(stepRange));
  seedFlag(replay, 'run seed (outcome draws, Thompson draws)');
  replay.addOption(new Option('--seeds <a..b>', 'run every seed a..b (inclusive) and report the spread; instead of --seed').argParser(seedRange));
  roundsFlag(replay, ourRoundsHelp);
  replay.addOption(new Option('--stream <mode>', 'consumed: prompts a policy pulls from later batches are gone from them for it; shared: every policy gets every step\'s whole batch').choices(replayStreams).default('consumed'));
  ourPlanFlags(replay)
    .option('--out <dir>', 'write metrics.json, summary.md and report.html here')
    .option('--quiet', 'no progress bar', false)
    .action(async (opts, cmd: Command) => {
      checkOurBounds(opts);
      resolvePolicies(opts.policies, 'replay');
      checkReportFolder(opts.out);
      const seeds = seedsOf(cmd, opts, 0);
      const reading = createProgress(io, opts.quiet, 'reading log');
      const input = await rereadable(opts.log, io);
      let log: Awaited<ReturnType<typeof readLog>>;
      try {
        log = await readLog(input.path, { format: opts.format as LogFormat | 'auto', onProgress: reading.update, name: opts.log });
      } finally {
        input.done(); // a streamed log's steps are in its own scratch file by now
      }
      const { run, format } = log;
      reading.finish();
      const warnings = checkTokenBudget(run, opts.log, format, opts.budgetTokens);
      if (log.skipped !== undefined) {
        const shown = log.skipped.slice(0, 5).join(', ');
        const more = log.skipped.length > 5 ? ` and ${log.skipped.length - 5} more` : '';
        warnings.push(`${opts.log}: read its step files (<step>.jsonl, as verl names them) only; left out ${log.skipped.length} other .jsonl file${log.skipped.length === 1 ? '' : 's'} beside them: ${shown}${more}`);
      }
      if (log.misnamed !== undefined) {
        const m = log.misnamed[0]!;
        const more = log.misnamed.length > 1 ? ` (and ${log.misnamed.length - 1} more step file${log.misnamed.length === 2 ? '' : 's'})` : '';
        warnings.push(`${m.where}: a line of step ${m.step} in the file of step ${m.own}${more}: its lines were read as the steps they name; a renamed file, or two runs' dumps in one folder?`);
      }
      if (log.repeats !== undefined) {
        warnings.push(`${log.repeats.count} results lines repeat a rollout_id of their step (the first at ${log.repeats.first}): each rollout counted once, as observe counts it`);
      }
      const steps = selectSteps(run.steps, opts.steps, opts.stepRange);
      const clipped = clippedRange(run.steps, opts.stepRange ?? (Array.isArray(opts.steps) ? opts.steps : undefined), steps);
      if (clipped !== undefined) warnings.push(clipped);
      // Our planner takes steps up to 2^31 − 1 (its decay counts them); the baselines any. Said
      // here, naming the log, not as a refused --step the user never gave.
      const last = steps.at(-1);
      if (last !== undefined && last > MAX_STEP && (opts.policies as string[]).some((p) => !(baselineNames as readonly string[]).includes(p))) {
        throw badInput(opts.log, `a logged step, ${last}, is above ${MAX_STEP} (2^31 − 1), the largest step our planner takes (its decay counts steps): renumber the log's steps, or replay only the baselines`);
      }
      const budget = budgetFrom(opts);
      const runs = runSeeds(io, opts.quiet, 'replaying', seeds, (seed, onProgress) => runPolicies(replayEnvironment(run), {
        policies: opts.policies, registry: createReplayPolicyRegistry(), minN: opts.minN, maxN: opts.maxN, seed,
        budget, steps, plan: ourPlanOptions(opts), stream: opts.stream as ReplayStream, onProgress, allocations: false,
      }));
      warnings.push(...idleWarnings(runs, opts.budgetTokens === undefined ? '--budget-rollouts' : '--budget-rollouts or --budget-tokens'));
      emitReport(io, opts.out, {
        kind: 'replay',
        title: `Replay of ${opts.log}`,
        source: opts.log,
        options: { format, seed: seeds[0], ...(seeds.length > 1 ? { seeds } : {}), min_n: opts.minN, max_n: opts.maxN, budget_rollouts: opts.budgetRollouts ?? 'logged rollouts of each step', budget_tokens: opts.budgetTokens ?? null, steps: [steps[0], steps.at(-1)], policies: opts.policies, default_policy: defaultPlanOptions.policy, default_value: defaultPlanOptions.value, rounds: opts.rounds, skip: opts.skip ?? 'under a token budget', fresh_cap: opts.freshCap, stream: opts.stream },
        notes: replayNotes,
        results: runs[0]!.results,
        ...(runs.length > 1 ? { seeds: runs } : {}),
        defaultPolicy: defaultPlanOptions.policy,
        defaultDetail: defaultDetail(opts.rounds, opts.freshCap),
        settings: replaySettings({ log: opts.log, format, run, steps, opts, seeds, command: commandLine(cmd) }),
        warnings,
      });
    });

  const simulate = program
    .command('simulate')
    .description(describe('simulate'))
    .requiredOption('--scenario <file>', 'scenario JSON (see fixtures/scenarios/)')
    .addOption(new Option('--policies <list>', 'comma-separated policies: the baselines, ours by posterior policy (bayes, thompson, mean), oracle').default([...defaultPolicyList(), 'oracle'], [...defaultPolicyList(), 'oracle'].join(',')).argParser(policyList));
  stepsFlag(simulate, 'steps to simulate (default: the scenario\'s)');
  seedFlag(simulate, 'run seed (outcome draws; default: the scenario\'s)', false);
  simulate.addOption(new Option('--seeds <a..b>', 'run every seed a..b (inclusive) and report the spread; instead of --seed').argParser(seedRange));
  boundFlags(simulate);
  roundsFlag(simulate, ourRoundsHelp);
  simulate.addOption(new Option('--stream <mode>', 'consumed: prompts a policy pulls from later batches are gone from them for it; shared: every policy gets every step\'s whole batch').choices(replayStreams).default('consumed'));
  ourPlanFlags(simulate)
    .option('--no-hints', 'candidates carry no offline hints (prior_pass_rate), whatever the scenario says: the same pool and groups')
    .option('--out <dir>', 'write metrics.json, summary.md and report.html here')
    .option('--quiet', 'no progress bar', false)
    .action((opts, cmd: Command) => {
      checkOurBounds(opts);
      resolvePolicies(opts.policies, 'simulate');
      checkReportFolder(opts.out);
      const warnings: string[] = [];
      // Printed with the table and carried into the report, as replay's warnings are (emitReport).
      const parsed = parseScenario(readText(opts.scenario), opts.scenario, warnings);
      const scenario = { ...parsed, ...(opts.steps === undefined ? {} : { steps: opts.steps }), ...(opts.hints === false ? { hints: null } : {}) };
      const seeds = seedsOf(cmd, opts, scenario.seed);
      const runs = scenarioBudgetNames(() => runSeeds(io, opts.quiet, 'simulating', seeds, (seed, onProgress) => runPolicies(simulatedEnvironment(scenario), {
        policies: opts.policies, registry: createReplayPolicyRegistry(), minN: opts.minN, maxN: opts.maxN, seed, plan: ourPlanOptions(opts), stream: opts.stream as ReplayStream, onProgress,
      })));
      warnings.push(...idleWarnings(runs, scenario.budget.tokens_per_prompt === null ? "the scenario's budget.rollouts_per_prompt" : "the scenario's budget.tokens_per_prompt"));
      emitReport(io, opts.out, {
        kind: 'simulate',
        title: `Simulation: ${scenario.name}`,
        source: opts.scenario,
        options: { scenario, seed: seeds[0], ...(seeds.length > 1 ? { seeds } : {}), min_n: opts.minN, max_n: opts.maxN, rounds: opts.rounds, skip: opts.skip ?? 'under a token budget', fresh_cap: opts.freshCap, stream: opts.stream, policies: opts.policies, baselines: baselineNames },
        notes: [
          scenario.description,
          'A closed-loop model (src/simulate/world.ts), not data: difficulty, drift and lengths follow the measured figures in CALIBRATION.md; each policy trains its own copy of the pool.',
          '"Hard" prompts have a true pass rate ≤ 0.2 when generated. oracle is our planner given the true pass rates in place of the posteriors: it shows what a perfect estimate adds, and is not a ceiling (it maximizes our value, not each column, so another policy can beat it on a column).',
        ],
        results: runs[0]!.results,
        ...(runs.length > 1 ? { seeds: runs } : {}),
        defaultPolicy: defaultPlanOptions.policy,
        defaultDetail: defaultDetail(opts.rounds, opts.freshCap),
        settings: simulateSettings({ file: opts.scenario, scenario, opts, seeds, command: commandLine(cmd) }),
        warnings,
      });
    });
}
