import { InvalidArgumentError, Option, type Command } from 'commander';
import { DEFAULT_MAX_TOKENS, PLAN_FORMATS } from '../plan/exports.js';
import { defaultPlanOptions, MAX_PREFILL_WEIGHT } from '../plan/options.js';
import { MAX_TOKEN_COUNT } from '../posterior/length.js';
import { describe } from './catalog.js';
import type { CliIo } from './io.js';
import { boundFlags, budgetFlags, decayFlags, multipleOfFlag, policyFlags, promptFieldOption, roundsLeftFlag, seedFlag, skipFlag, stateFlag } from './options.js';
import { intArg, numberArg } from './parse.js';

/** Registers `plan`, `observe`, `inspect` and `backup`; their actions live in cli/state-commands.ts. */
export function registerStateCommands(program: Command, io: CliIo): void {
  const plan = program
    .command('plan')
    .description(describe('plan'))
    .requiredOption('--prompts <path|->', 'candidate prompts, JSONL');
  stateFlag(plan);
  budgetFlags(plan, { rollouts: 'total rollouts (left in this step)', tokens: 'total generated tokens (left in this step)' });
  boundFlags(plan);
  skipFlag(plan);
  policyFlags(plan);
  seedFlag(plan);
  plan
    .addOption(new Option('--step <int>', 'step to plan (default: last observed + 1)').argParser(intArg(0)))
    .addOption(new Option('--prefill-weight <w>', 'tokens charged per prompt token once per group').default(defaultPlanOptions.prefillWeight).argParser(numberArg(0, MAX_PREFILL_WEIGHT)));
  multipleOfFlag(plan)
    .option('--out <path|->', 'where to write the plan', '-')
    .addOption(new Option('--format <format>', 'plan output format').choices(PLAN_FORMATS).default('json'))
    .option('--model <name>', 'model name for --format vllm-batch request bodies')
    // issue 11: a generation limit for prompts without max_tokens, and the field holding the text.
    .addOption(new Option('--max-tokens <int>', `max_tokens of prompts that give none (the plan knows it); exports use ${DEFAULT_MAX_TOKENS} when not given`).argParser(intArg(1, MAX_TOKEN_COUNT)))
    .addOption(promptFieldOption('prompts field holding the text, for --format vllm-batch and sglang'));
  decayFlags(plan);
  roundsLeftFlag(plan);
  // --max-n not given: left to the library's default (the same 64), so a --min-n above it is named
  // as the mistake ("--max-n must be an integer ≥ 100, got 64" named a flag the user never gave).
  plan.action(async (opts, cmd: Command) => {
    unusedRoundFlags(io, cmd, opts.roundsLeft as number);
    return (await import('./state-commands.js')).planCommand(io, cmd.getOptionValueSource('maxN') === 'default' ? { ...opts, maxN: undefined } : opts);
  });

  const observe = program
    .command('observe')
    .description(describe('observe'))
    .requiredOption('--results <path|->', 'results, JSONL');
  stateFlag(observe);
  decayFlags(observe).action(async (opts) => (await import('./state-commands.js')).observeCommand(io, opts));

  stateFlag(program.command('inspect').description(describe('inspect')))
    .addOption(new Option('--prompt <id>', 'one prompt').argParser(promptIdArg))
    .action(async (opts) => (await import('./state-commands.js')).inspectCommand(io, opts));

  stateFlag(program.command('backup').description(describe('backup')), 'the SQLite state file to copy', '<path>')
    .requiredOption('--out <path|url>', 'the copy: a new SQLite state file (replaced if it is one no process has open), or a postgres:// URL whose ?schema= holds no state yet (made if missing; one transaction)')
    .action(async (opts) => (await import('./backup.js')).backupCommand(io, opts));
}

/** `inspect --prompt`: an id as results and prompts files give them, so never empty (it answered for a prompt "" no file can name). */
function promptIdArg(value: string): string {
  if (value === '') throw new InvalidArgumentError('must be a prompt id, got ""');
  return value;
}

/**
 * `--fresh-share` and `--fresh-cap` shape a round with rounds after it: given with `--rounds-left 1`
 * (the default: one plan a step) they change nothing, and said nothing (stylerev review,
 * 2026-11-29: `--fresh-share 0 --fresh-cap 5` planned 10, 10, 10 as without them). A warning
 * on stderr; the plan is the same.
 */
function unusedRoundFlags(io: CliIo, cmd: Command, roundsLeft: number): void {
  if (roundsLeft !== 1) return;
  for (const [key, flag] of [['freshShare', '--fresh-share'], ['freshCap', '--fresh-cap']] as const) {
    if (cmd.getOptionValueSource(key) === 'cli') io.stderr(`rollout-budget: warning: ${flag} shapes a round with rounds after it (--rounds-left 2 or more); with --rounds-left 1 (one plan a step) it changes nothing\n`);
  }
}
