import { Command, CommanderError, Option } from 'commander';
import { Allocator } from '../allocator.js';
import { RolloutBudgetError } from '../errors.js';
import { parsePromptsAt, parseResults } from '../io/formats.js';
import { DEFAULT_MAX_TOKENS, defaultLimitWarning, formatPlan, groupsWithoutLimit, PLAN_FORMATS } from '../plan/exports.js';
import type { PlanOptionsInput } from '../plan/options.js';
import { runDemo } from './demo.js';
import { registerExecutorCommands } from './executor.js';
import { processIo, readInput, writeOutput, type CliIo } from './io.js';

export type { CliIo };
import { registerReplayCommands } from './replay.js';
import { intArg, numberArg } from './parse.js';
import { registerServeCommands } from './serve.js';

const decayOptions = (cmd: Command) =>
  cmd
    .addOption(new Option('--decay <rate>', 'per-step forgetting of evidence toward the prior (λ)').argParser(numberArg(0, 1)))
    .addOption(new Option('--reobserve-discount <rate>', 'discount of old evidence when a prompt is re-observed (ρ)').argParser(numberArg(0, 1)));

function decayFrom(opts: { decay?: number; reobserveDiscount?: number }): PlanOptionsInput['decay'] {
  return {
    ...(opts.decay === undefined ? {} : { forgetPerStep: opts.decay }),
    ...(opts.reobserveDiscount === undefined ? {} : { reobserveDiscount: opts.reobserveDiscount }),
  };
}

/** Builds the command tree. Actions push their exit code through `done`. */
export function buildProgram(io: CliIo): Command {
  const program = new Command('rollout-budget')
    .description('Decide how many rollouts each prompt gets in an RL step, under a rollout or token budget.')
    .version('0.1.0')
    .exitOverride()
    .configureOutput({ writeOut: io.stdout, writeErr: io.stderr, outputError: () => undefined });

  const plan = program
    .command('plan')
    .description('write an allocation plan for candidate prompts')
    .requiredOption('--prompts <path|->', 'candidate prompts, JSONL')
    .option('--state <path>', 'state database', './rollout-budget.db')
    .addOption(new Option('--budget-rollouts <int>', 'total rollouts').argParser(intArg(0)))
    .addOption(new Option('--budget-tokens <int>', 'total generated tokens').argParser(intArg(0)))
    .addOption(new Option('--min-n <int>', 'rollouts per included prompt, at least').default(2).argParser(intArg(1)))
    .addOption(new Option('--max-n <int>', 'rollouts per prompt, at most').default(64).argParser(intArg(1)))
    .option('--skip', 'prompts may get 0 rollouts (select from a pool)', false)
    .option('--policy <name>', 'how p is taken from the posterior: bayes, thompson, mean', 'bayes')
    .option('--value <name>', 'value of n rollouts: balanced, knapsack, informative, variance, hit', 'balanced')
    .addOption(new Option('--seed <int>', 'run seed').default(0).argParser(intArg(0)))
    .addOption(new Option('--step <int>', 'step to plan (default: last observed + 1)').argParser(intArg(0)))
    .addOption(new Option('--prefill-weight <w>', 'tokens charged per prompt token once per group').default(0).argParser(numberArg(0, 1e6)))
    .addOption(new Option('--multiple-of <int>', 'total rollouts a multiple of this (rollout workers, data-parallel ranks)').argParser(intArg(1)))
    .option('--out <path|->', 'where to write the plan', '-')
    .addOption(new Option('--format <format>', 'plan output format').choices(PLAN_FORMATS).default('json'))
    .option('--model <name>', 'model name for --format vllm-batch request bodies')
    // issue 11: a generation limit for prompts without max_tokens, and the field holding the text.
    .addOption(new Option('--max-tokens <int>', `max_tokens of prompts that give none (the plan knows it); exports use ${DEFAULT_MAX_TOKENS} when not given`).argParser(intArg(1)))
    .option('--prompt-field <name>', 'prompts field holding the text, for --format vllm-batch and sglang', 'prompt');
  decayOptions(plan).action(async (opts) => {
    const input = await readInput(io, opts.prompts);
    const parsed = parsePromptsAt(input.text, input.name);
    const candidates = opts.maxTokens === undefined ? parsed.candidates : parsed.candidates.map((c) => (c.max_tokens === undefined ? { ...c, max_tokens: opts.maxTokens } : c));
    const allocator = new Allocator({ state: opts.state });
    try {
      const result = allocator.plan(
        candidates,
        {
          ...(opts.budgetRollouts === undefined ? {} : { rollouts: opts.budgetRollouts }),
          ...(opts.budgetTokens === undefined ? {} : { tokens: opts.budgetTokens }),
        },
        {
          minN: opts.minN,
          maxN: opts.maxN,
          skip: opts.skip,
          policy: opts.policy,
          value: opts.value,
          seed: opts.seed,
          prefillWeight: opts.prefillWeight,
          decay: decayFrom(opts),
          ...(opts.step === undefined ? {} : { step: opts.step }),
          ...(opts.multipleOf === undefined ? {} : { multipleOf: opts.multipleOf }),
        },
      );
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
  decayOptions(observe).action(async (opts) => {
    const input = await readInput(io, opts.results);
    const batch = parseResults(input.text, input.name);
    const allocator = new Allocator({ state: opts.state });
    try {
      const summary = allocator.observe(batch, { decay: decayFrom(opts) });
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
            },
            null,
            2,
          )}\n`,
        );
      } finally {
        allocator.close();
      }
    });

  program
    .command('demo')
    .description('plan and observe a few steps on the embedded real fixture (One-Shot-RLVR)')
    .addOption(new Option('--steps <int>', 'steps to run').default(20).argParser(intArg(1)))
    .addOption(new Option('--seed <int>', 'run seed').default(0).argParser(intArg(0)))
    .action((opts) => {
      runDemo(io, { steps: opts.steps, seed: opts.seed });
    });

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
      io.stderr(`rollout-budget: ${error.message.replace(/^error: /, '')}\n`);
      return 2;
    }
    if (error instanceof RolloutBudgetError) {
      io.stderr(`rollout-budget: ${error.message}\n`);
      return error.exitCode;
    }
    io.stderr(`rollout-budget: internal error: ${(error as Error).stack ?? String(error)}\n`);
    return 1;
  }
}
