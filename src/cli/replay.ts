import { Command, InvalidArgumentError, Option } from 'commander';
import { badOption } from '../errors.js';
import { readText } from '../io/jsonl.js';
import { defaultPlanOptions, defaultRounds } from '../plan/options.js';
import type { Budget } from '../plan/types.js';
import { runPolicies } from '../replay/engine.js';
import { replayEnvironment } from '../replay/env.js';
import { loadLog, logFormats, type LogFormat } from '../replay/log.js';
import { baselineNames, createReplayPolicyRegistry, defaultPolicyList } from '../replay/policies.js';
import { LoggedRun } from '../replay/visits.js';
import { parseScenario } from '../simulate/scenario.js';
import { simulatedEnvironment } from '../simulate/world.js';
import type { CliIo } from './io.js';
import { intArg } from './parse.js';
import { createProgress } from './progress.js';
import { checkTokenBudget, commandLine, emitReport, runSeeds, seedRange, seedsOf } from './report-run.js';
import { defaultDetail, replaySettings, simulateSettings } from './report-settings.js';

/** `a:b` (inclusive; either side may be left out) → [from, to]. */
export function stepRange(value: string): [number, number] {
  const m = /^\s*(\d*)\s*:\s*(\d*)\s*$/.exec(value);
  if (m === null || (m[1] === '' && m[2] === '')) throw new InvalidArgumentError(`expected a step range "a:b" (inclusive, e.g. 0:99 or 100:), got "${value}"`);
  const from = m[1] === '' ? 0 : Number(m[1]);
  const to = m[2] === '' ? Number.MAX_SAFE_INTEGER : Number(m[2]);
  if (to < from) throw new InvalidArgumentError(`the step range "${value}" ends before it starts`);
  return [from, to];
}

function policyList(value: string): string[] {
  const names = value.split(',').map((s) => s.trim()).filter((s) => s !== '');
  if (names.length === 0) throw new InvalidArgumentError(`expected a comma-separated list of policies, got "${value}"`);
  return names;
}

/** Replay notes shown in summary.md and report.html. */
export const replayNotes = [
  'Each policy plans a step only from the groups it generated itself at earlier steps; its groups are then scored against the step\'s logged outcomes.',
  'Up to the logged group size, outcomes are drawn without replacement from the logged group (exact). Beyond it they are Bernoulli draws at the prompt\'s pass rate pooled over the visit and its neighbouring visits (one before, one after): a model, not a record.',
  '"Hard" prompts have that pooled pass rate ≤ 0.2. Policies that refill or select from a pool (dapo, greso, mopps) consume later batches\' prompts, which are then missing from those batches for them.',
];

function resolvePolicies(names: readonly string[]): void {
  const registry = createReplayPolicyRegistry();
  for (const n of names) registry.get(n);
}

/** Registers `replay` and `simulate` on the program. */
export function registerReplayCommands(program: Command, io: CliIo): void {
  program
    .command('replay')
    .description('score allocation policies side by side on a logged run')
    .requiredOption('--log <path>', 'the logged run: a JSONL file, or a folder of verl rollout dumps')
    .addOption(new Option('--format <name>', 'log format').choices(['auto', ...logFormats]).default('auto'))
    .addOption(new Option('--policies <list>', 'comma-separated policies').default(defaultPolicyList(), defaultPolicyList().join(',')).argParser(policyList))
    .addOption(new Option('--budget-rollouts <int>', 'rollouts per step (default: the step\'s logged rollouts)').argParser(intArg(1)))
    .addOption(new Option('--budget-tokens <int>', 'generated tokens per step (default: none)').argParser(intArg(1)))
    .addOption(new Option('--min-n <int>', 'rollouts per included prompt, at least').default(2).argParser(intArg(1)))
    .addOption(new Option('--max-n <int>', 'rollouts per prompt, at most').default(64).argParser(intArg(1)))
    .addOption(new Option('--steps <a:b>', 'only logged steps a..b (inclusive)').argParser(stepRange))
    .addOption(new Option('--seed <int>', 'run seed (outcome draws, Thompson draws)').default(0).argParser(intArg(0)))
    .addOption(new Option('--seeds <a..b>', 'run every seed a..b (inclusive) and report the spread; instead of --seed').argParser(seedRange))
    .addOption(new Option('--rounds <int>', 'our policies plan and generate each step in this many rounds (later rounds top up groups by what they showed)').default(defaultRounds).argParser(intArg(1)))
    .option('--out <dir>', 'write metrics.json, summary.md and report.html here')
    .option('--quiet', 'no progress bar', false)
    .action(async (opts, cmd: Command) => {
      if (opts.maxN < opts.minN) throw badOption(`max_n must be ≥ min_n ${opts.minN}, got ${opts.maxN}`);
      resolvePolicies(opts.policies);
      const seeds = seedsOf(cmd, opts, 0);
      const reading = createProgress(io, opts.quiet, 'reading log');
      const { visits, format } = await loadLog(opts.log, { format: opts.format as LogFormat | 'auto', onProgress: reading.update });
      reading.finish();
      const warnings = checkTokenBudget(visits, opts.log, format, opts.budgetTokens);
      const run = new LoggedRun(visits);
      const range: [number, number] | undefined = opts.steps;
      const steps = range === undefined ? run.steps : run.steps.filter((s) => s >= range[0] && s <= range[1]);
      if (steps.length === 0) throw badOption(`no logged steps in ${range === undefined ? 'the log' : `${range[0]}:${range[1]}`}; the log has steps ${run.steps[0]}..${run.steps.at(-1)}`);
      const budget: Budget = {
        ...(opts.budgetRollouts === undefined ? {} : { rollouts: opts.budgetRollouts }),
        ...(opts.budgetTokens === undefined ? {} : { tokens: opts.budgetTokens }),
      };
      const runs = runSeeds(io, opts.quiet, 'replaying', seeds, (seed, onProgress) => runPolicies(replayEnvironment(run), {
        policies: opts.policies, registry: createReplayPolicyRegistry(), minN: opts.minN, maxN: opts.maxN, seed,
        budget, steps, plan: { rounds: opts.rounds }, onProgress,
      }));
      emitReport(io, opts.out, {
        kind: 'replay',
        title: `Replay of ${opts.log}`,
        source: opts.log,
        options: { format, seed: seeds[0], ...(seeds.length > 1 ? { seeds } : {}), min_n: opts.minN, max_n: opts.maxN, budget_rollouts: opts.budgetRollouts ?? 'logged rollouts of each step', budget_tokens: opts.budgetTokens ?? null, steps: [steps[0], steps.at(-1)], policies: opts.policies, default_policy: defaultPlanOptions.policy, default_value: defaultPlanOptions.value, rounds: opts.rounds },
        notes: replayNotes,
        results: runs[0]!.results,
        ...(runs.length > 1 ? { seeds: runs } : {}),
        defaultPolicy: defaultPlanOptions.policy,
        defaultDetail: defaultDetail(opts.rounds),
        settings: replaySettings({ log: opts.log, format, run, steps, opts, seeds, command: commandLine(cmd) }),
        warnings,
      });
    });

  program
    .command('simulate')
    .description('score allocation policies in a closed-loop simulated pool (truth known: oracle included)')
    .requiredOption('--scenario <file>', 'scenario JSON (see fixtures/scenarios/)')
    .addOption(new Option('--policies <list>', 'comma-separated policies').default([...defaultPolicyList(), 'oracle'], [...defaultPolicyList(), 'oracle'].join(',')).argParser(policyList))
    .addOption(new Option('--steps <int>', 'steps to simulate (default: the scenario\'s)').argParser(intArg(1)))
    .addOption(new Option('--seed <int>', 'run seed (outcome draws; default: the scenario\'s)').argParser(intArg(0)))
    .addOption(new Option('--seeds <a..b>', 'run every seed a..b (inclusive) and report the spread; instead of --seed').argParser(seedRange))
    .addOption(new Option('--min-n <int>', 'rollouts per included prompt, at least').default(2).argParser(intArg(1)))
    .addOption(new Option('--max-n <int>', 'rollouts per prompt, at most').default(64).argParser(intArg(1)))
    .addOption(new Option('--rounds <int>', 'our policies plan and generate each step in this many rounds (later rounds top up groups by what they showed)').default(defaultRounds).argParser(intArg(1)))
    .option('--out <dir>', 'write metrics.json, summary.md and report.html here')
    .option('--quiet', 'no progress bar', false)
    .action((opts, cmd: Command) => {
      if (opts.maxN < opts.minN) throw badOption(`max_n must be ≥ min_n ${opts.minN}, got ${opts.maxN}`);
      resolvePolicies(opts.policies);
      const parsed = parseScenario(readText(opts.scenario), opts.scenario);
      const scenario = opts.steps === undefined ? parsed : { ...parsed, steps: opts.steps };
      const seeds = seedsOf(cmd, opts, scenario.seed);
      const runs = runSeeds(io, opts.quiet, 'simulating', seeds, (seed, onProgress) => runPolicies(simulatedEnvironment(scenario), {
        policies: opts.policies, registry: createReplayPolicyRegistry(), minN: opts.minN, maxN: opts.maxN, seed, plan: { rounds: opts.rounds }, onProgress,
      }));
      emitReport(io, opts.out, {
        kind: 'simulate',
        title: `Simulation: ${scenario.name}`,
        source: opts.scenario,
        options: { scenario, seed: seeds[0], ...(seeds.length > 1 ? { seeds } : {}), min_n: opts.minN, max_n: opts.maxN, rounds: opts.rounds, policies: opts.policies, baselines: baselineNames },
        notes: [
          scenario.description,
          'A closed-loop model (src/simulate/world.ts), not data: difficulty, drift and lengths follow the measured figures in CALIBRATION.md; each policy trains its own copy of the pool.',
          '"Hard" prompts have a true pass rate ≤ 0.2 when generated. oracle is our planner given the true pass rates in place of the posteriors: it shows what a perfect estimate adds, and is not a ceiling (it maximizes our value, not each column, so another policy can beat it on a column).',
        ],
        results: runs[0]!.results,
        ...(runs.length > 1 ? { seeds: runs } : {}),
        defaultPolicy: defaultPlanOptions.policy,
        defaultDetail: defaultDetail(opts.rounds),
        settings: simulateSettings({ file: opts.scenario, scenario, opts, seeds, command: commandLine(cmd) }),
      });
    });
}
