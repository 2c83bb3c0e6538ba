import { Option, type Command } from 'commander';
import { defaultPlanOptions, defaultRounds, type PlanOptionsInput } from '../plan/options.js';
import { camelOf, optionsFromFields } from '../option-fields.js';
import { createPosteriorPolicyRegistry } from '../plan/policies.js';
import { DEFAULT_PROMPT_FIELD } from '../plan/exports.js';
import type { Budget } from '../plan/types.js';
import { createValueRegistry } from '../value/functions.js';
import { freshCapArg, intArg, numberArg, stateArg } from './parse.js';

/**
 * The flags several commands share, declared once here with their defaults read from the
 * library's (so `--help` shows the defaults the library plans with). Commands add them with
 * the helpers below and read them back with `budgetFrom` / `planOptionsFrom`.
 */

export { flagOfField } from './flags.js';

/** Values the shared flags parse to (commander's camelCase keys). */
export interface SharedFlags {
  budgetRollouts?: number;
  budgetTokens?: number;
  minN?: number;
  maxN?: number;
  skip?: boolean;
  policy?: string;
  value?: string;
  seed?: number;
  decay?: number;
  reobserveDiscount?: number;
  roundsLeft?: number;
  freshShare?: number;
  freshCap?: number;
  multipleOf?: number;
  step?: number;
  prefillWeight?: number;
}

/** The state's default location, for every command with `--state`. */
export const DEFAULT_STATE = './rollout-budget.db';

/** `--state`: a SQLite file or a PostgreSQL URL (another URL is refused: parse.ts stateArg). */
export function stateFlag(cmd: Command, help = 'state database: a SQLite file, or postgres://user@host:port/db[?schema=name]', placeholder = '<path|url>'): Command {
  return cmd.addOption(new Option(`--state ${placeholder}`, help).default(DEFAULT_STATE).argParser(stateArg));
}

/** `--budget-rollouts` and `--budget-tokens` (no defaults: at least one is required by `plan`). */
export function budgetFlags(cmd: Command, help: { rollouts: string; tokens: string }, min = 0): Command {
  return cmd
    .addOption(new Option('--budget-rollouts <int>', help.rollouts).argParser(intArg(min)))
    .addOption(new Option('--budget-tokens <int>', help.tokens).argParser(intArg(min)));
}

/** `--min-n` and `--max-n`. */
export function boundFlags(cmd: Command): Command {
  return cmd
    .addOption(new Option('--min-n <int>', 'rollouts per included prompt, at least').default(defaultPlanOptions.minN).argParser(intArg(1)))
    .addOption(new Option('--max-n <int>', 'rollouts per prompt, at most').default(defaultPlanOptions.maxN).argParser(intArg(1)));
}

/** `--skip`. */
export function skipFlag(cmd: Command, help = 'prompts may get 0 rollouts (select from a pool)'): Command {
  return cmd.option('--skip', help, defaultPlanOptions.skip);
}

/** `--policy` (how p is taken from the posterior) and `--value`, their names from the registries. */
export function policyFlags(cmd: Command): Command {
  const policies = createPosteriorPolicyRegistry().names().join(', ');
  const values = createValueRegistry().names().join(', ');
  return cmd
    .option('--policy <name>', `posterior policy, how p is taken from the posterior: ${policies}`, defaultPlanOptions.policy)
    .option('--value <name>', `value of n rollouts: ${values}`, defaultPlanOptions.value);
}

/** `--seed`; without a default where the command has its own (simulate: the scenario's). */
export function seedFlag(cmd: Command, help = 'run seed', withDefault = true): Command {
  const option = new Option('--seed <int>', help).argParser(intArg(0));
  return cmd.addOption(withDefault ? option.default(defaultPlanOptions.seed) : option);
}

/**
 * `--decay` and `--reobserve-discount`, the two forgetting rates, with the library's defaults
 * (`serve` passes a prefix: there they are the defaults of every request).
 */
export function decayFlags(cmd: Command, prefix = ''): Command {
  const d = defaultPlanOptions.decay;
  return cmd
    .addOption(new Option('--decay <rate>', `${prefix}per-step forgetting of evidence toward the prior (λ)`).default(d.forgetPerStep).argParser(numberArg(0, 1)))
    .addOption(new Option('--reobserve-discount <rate>', `${prefix}discount of old evidence when a prompt is re-observed (ρ)`).default(d.reobserveDiscount).argParser(numberArg(0, 1)));
}

/** `--rounds-left` of `plan`: one call is one round, and the budgets are what is left of the step. */
export function roundsLeftFlag(cmd: Command): Command {
  return cmd.addOption(
    new Option('--rounds-left <int>', 'rounds left in this step, this one included: the budgets are what is left of the step, and this plan spends its share of them')
      .default(defaultPlanOptions.roundsLeft)
      .argParser(intArg(1)),
  ).addOption(
    new Option('--fresh-share <φ>', 'with rounds left: the part of the later rounds\' budget a round takes on top of its even share when its prompts are new to the state (× their share; 0: an even share)')
      .default(defaultPlanOptions.freshShare)
      .argParser(numberArg(0, 1)),
  ).addOption(
    new Option('--fresh-cap <c>', 'with rounds left, a rollout budget and no candidate with partial_rewards (a step\'s first round): a prompt new to the state gets at most ⌈c × this round\'s rollouts ÷ the prompts⌉ this round (at least --min-n), unless that alone leaves the round\'s rollouts unspent; 0: no cap')
      .default(defaultPlanOptions.freshCap)
      .argParser(freshCapArg),
  );
}

/** `--multiple-of` (issue 10): Σ n a multiple of k, no default (no constraint). */
export function multipleOfFlag(cmd: Command, help = 'total rollouts a multiple of this (rollout workers, data-parallel ranks)'): Command {
  return cmd.addOption(new Option('--multiple-of <int>', help).argParser(intArg(1)));
}

/** `--rounds` of the commands that generate themselves (loop, replay, simulate, demo). */
export function roundsFlag(cmd: Command, help = 'plan and generate each step in this many rounds; later rounds top up groups by what they showed'): Command {
  return cmd.addOption(new Option('--rounds <int>', help).default(defaultRounds).argParser(intArg(1)));
}

/** `--steps <int>`: a count of steps, in every command that has it. */
export function stepsFlag(cmd: Command, help: string, fallback?: number): Command {
  const option = new Option('--steps <int>', help).argParser(intArg(1));
  return cmd.addOption(fallback === undefined ? option : option.default(fallback));
}

/** The budget the budget flags give. */
export function budgetFrom(opts: SharedFlags): Budget {
  return {
    ...(opts.budgetRollouts === undefined ? {} : { rollouts: opts.budgetRollouts }),
    ...(opts.budgetTokens === undefined ? {} : { tokens: opts.budgetTokens }),
  };
}

/**
 * The plan options the flags set (those a command does not declare stay unset): each field of
 * src/option-fields.ts from its commander key (`--reobserve-discount` → `reobserveDiscount`).
 */
export function planOptionsFrom(opts: SharedFlags): PlanOptionsInput {
  const values = opts as Readonly<Record<string, unknown>>;
  return optionsFromFields((f) => values[camelOf(f.field)]);
}

/** `--prompt-field`, declared once (four commands take it); `what` says what the command does with the text. */
export function promptFieldOption(what: string): Option {
  return new Option('--prompt-field <name>', what).default(DEFAULT_PROMPT_FIELD);
}

/** `--verifier`, declared once (`execute`, `loop`, `grade`). */
export function verifierOption(): Option {
  return new Option('--verifier <spec>', 'math, or command:<cmd> (reads rollouts JSONL on stdin, prints one reward a line)').default('math');
}
