import { Command, CommanderError, Option } from 'commander';
import { Allocator } from '../allocator.js';
import { RolloutBudgetError, withFieldNames } from '../errors.js';
import { parsePromptsAt, parseResults } from '../io/formats.js';
import { DEFAULT_MAX_TOKENS, defaultLimitWarning, formatPlan, groupsWithoutLimit, PLAN_FORMATS } from '../plan/exports.js';
import { defaultPlanOptions, resolvePlanOptions } from '../plan/options.js';
import { calibrationSummary } from '../posterior/hints.js';
import { registerDemoCommand } from './demo.js';
import { registerExecutorCommands } from './executor.js';
import { processIo, readInput, writeOutput, type CliIo } from './io.js';
import {
  boundFlags, budgetFlags, budgetFrom, decayFlags, flagOfField, multipleOfFlag, planOptionsFrom, policyFlags, roundsLeftFlag, seedFlag, skipFlag,
} from './options.js';
import { flagValueMessage, intArg, numberArg } from './parse.js';
import { registerReplayCommands } from './replay.js';
import { registerServeCommands } from './serve.js';

export type { CliIo };

/** Builds the command tree. Actions throw on a caller mistake; runCli turns that into the exit code. */
export function buildProgram(io: CliIo): Command {
  const program = new Command('rollout-budget')
    .description('Decide how many rollouts each prompt gets in an RL step, under a rollout or token budget.')
    .version('0.1.0')
    .exitOverride()
    .configureOutput({ writeOut: io.stdout, writeErr: io.stderr, outputError: () => undefined });

  const plan = program
    .command('plan')
    .description('write an allocation plan for candidate prompts (one round of a step)')
    .requiredOption('--prompts <path|->', 'candidate prompts, JSONL')
    .option('--state <path>', 'state database', './rollout-budget.db');
  budgetFlags(plan, { rollouts: 'total rollouts (left in this step)', tokens: 'total generated tokens (left in this step)' });
  boundFlags(plan);
  skipFlag(plan);
  policyFlags(plan);
  seedFlag(plan);
  plan
    .addOption(new Option('--step <int>', 'step to plan (default: last observed + 1)').argParser(intArg(0)))
    .addOption(new Option('--prefill-weight <w>', 'tokens charged per prompt token once per group').default(defaultPlanOptions.prefillWeight).argParser(numberArg(0, 1e6)));
  multipleOfFlag(plan)
    .option('--out <path|->', 'where to write the plan', '-')
    .addOption(new Option('--format <format>', 'plan output format').choices(PLAN_FORMATS).default('json'))
    .option('--model <name>', 'model name for --format vllm-batch request bodies')
    // issue 11: a generation limit for prompts without max_tokens, and the field holding the text.
    .addOption(new Option('--max-tokens <int>', `max_tokens of prompts that give none (the plan knows it); exports use ${DEFAULT_MAX_TOKENS} when not given`).argParser(intArg(1)))
    .option('--prompt-field <name>', 'prompts field holding the text, for --format vllm-batch and sglang', 'prompt');
  decayFlags(plan);
  roundsLeftFlag(plan);
  plan.action(async (opts) => {
    const input = await readInput(io, opts.prompts);
    const parsed = parsePromptsAt(input.text, input.name);
    const candidates = opts.maxTokens === undefined ? parsed.candidates : parsed.candidates.map((c) => (c.max_tokens === undefined ? { ...c, max_tokens: opts.maxTokens } : c));
    const allocator = new Allocator({ state: opts.state });
    try {
      const result = allocator.plan(candidates, budgetFrom(opts), {
        ...planOptionsFrom(opts),
        prefillWeight: opts.prefillWeight,
        ...(opts.step === undefined ? {} : { step: opts.step }),
      });
      const byId = new Map(candidates.map((c) => [c.id, c]));
      const exportOptions = { model: opts.model, candidates: byId, promptField: opts.promptField, promptLines: parsed.lines, ...(opts.maxTokens === undefined ? {} : { maxTokens: opts.maxTokens }) };
      writeOutput(io, opts.out, formatPlan(result, opts.format, exportOptions));
      const unlimited = groupsWithoutLimit(result);
      if (unlimited > 0 && (opts.format === 'json' || opts.format === 'jsonl')) {
        io.stderr(`rollout-budget: warning: ${unlimited} groups have no max_tokens (their prompts give none, no --max-tokens): a server stops them at its own default (vLLM 16 tokens on /v1/completions, SGLang 128); execute sends ${DEFAULT_MAX_TOKENS}\n`);
      } else if (unlimited > 0) {
        io.stderr(`rollout-budget: warning: ${defaultLimitWarning(unlimited, exportOptions)}\n`);
      }
    } finally {
      allocator.close();
    }
  });

  const observe = program
    .command('observe')
    .description('apply rollout results to the state (one transaction, idempotent)')
    .requiredOption('--results <path|->', 'results, JSONL')
    .option('--state <path>', 'state database', './rollout-budget.db');
  decayFlags(observe).action(async (opts) => {
    const input = await readInput(io, opts.results);
    const batch = parseResults(input.text, input.name);
    const allocator = new Allocator({ state: opts.state });
    try {
      const summary = allocator.observe(batch, planOptionsFrom(opts));
      io.stdout(`${JSON.stringify(summary)}\n`);
    } finally {
      allocator.close();
    }
  });

  program
    .command('inspect')
    .description('show the state, or one prompt\'s posterior')
    .option('--state <path>', 'state database', './rollout-budget.db')
    .option('--prompt <id>', 'one prompt')
    .action((opts) => {
      const allocator = new Allocator({ state: opts.state });
      try {
        if (opts.prompt !== undefined) {
          io.stdout(`${JSON.stringify(allocator.posterior(opts.prompt), null, 2)}\n`);
          return;
        }
        const snapshot = allocator.snapshot();
        const probe = allocator.posterior('\u0000never-seen');
        io.stdout(
          `${JSON.stringify(
            {
              prompts: allocator.store.count(),
              last_step: snapshot.lastStep,
              prior_for_new_prompts: { alpha: probe.alpha, beta: probe.beta, p_mean: probe.p_mean },
              mean_tokens: {
                correct: snapshot.all.correctCount > 0 ? snapshot.all.correctTokens / snapshot.all.correctCount : null,
                wrong: snapshot.all.wrongCount > 0 ? snapshot.all.wrongTokens / snapshot.all.wrongCount : null,
              },
              // How offline hints map to observed pass rates, pooled and per group (posterior/hints.ts).
              hint_calibration: calibrationSummary(snapshot, resolvePlanOptions().prior),
            },
            null,
            2,
          )}\n`,
        );
      } finally {
        allocator.close();
      }
    });

  registerDemoCommand(program, io);
  registerServeCommands(program, io);
  registerExecutorCommands(program, io);
  registerReplayCommands(program, io);
  return program;
}

/**
 * Runs the CLI and returns its exit code: 0 on success, 2 on a caller mistake (bad input,
 * bad flag, unreadable file, infeasible budget), 1 on an internal error. Never exits itself.
 */
export async function runCli(argv: readonly string[], io: CliIo = processIo): Promise<number> {
  const program = buildProgram(io);
  try {
    await program.parseAsync([...argv], { from: 'user' });
    return 0;
  } catch (error) {
    if (error instanceof CommanderError) {
      if (error.code === 'commander.helpDisplayed' || error.code === 'commander.version' || error.exitCode === 0) return 0;
      io.stderr(`rollout-budget: ${flagValueMessage(error.message)}\n`);
      return 2;
    }
    if (error instanceof RolloutBudgetError) {
      io.stderr(`rollout-budget: ${withFieldNames(error, flagOfField).message}\n`);
      return error.exitCode;
    }
    io.stderr(`rollout-budget: internal error: ${(error as Error).stack ?? String(error)}\n`);
    return 1;
  }
}
