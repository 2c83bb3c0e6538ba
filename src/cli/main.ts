import { Command, CommanderError, Option } from 'commander';
import { RolloutBudgetError, withFieldNames } from '../errors.js';
import { commandOf, COMMANDS, type CommandGroup } from './catalog.js';
import { processIo, type CliIo } from './io.js';
import { flagOfField } from './flags.js';
import { flagValueMessage } from './parse.js';

export type { CliIo };

/** Each group's registration, in the module that declares its flags. */
const REGISTER: Record<CommandGroup, () => Promise<(program: Command, io: CliIo) => void>> = {
  state: async () => (await import('./state.js')).registerStateCommands,
  demo: async () => (await import('./demo.js')).registerDemoCommand,
  serve: async () => (await import('./serve.js')).registerServeCommands,
  executor: async () => (await import('./executor.js')).registerExecutorCommands,
  replay: async () => (await import('./replay.js')).registerReplayCommands,
};

/**
 * Builds the command tree for running `command` (cli/catalog.ts commandOf): that command's
 * group in full, the others as listing lines. Actions throw on a caller mistake; runCli turns
 * that into the exit code.
 */
export async function buildProgram(io: CliIo, command?: string): Promise<Command> {
  const program = new Command('rollout-budget')
    .description('Decide how many rollouts each prompt gets in an RL step, under a rollout or token budget.')
    .version('0.1.0')
    .exitOverride()
    .configureOutput({ writeOut: io.stdout, writeErr: io.stderr, outputError: () => undefined });

  // The group of the command that runs is registered in full (its module loaded); the other
  // commands get their catalog line only, which is all `--help` shows of them.
  const wanted = COMMANDS.find((c) => c.name === command)?.group;
  const done = new Set<CommandGroup>();
  for (const entry of COMMANDS) {
    if (entry.group === wanted) {
      if (!done.has(entry.group)) (await REGISTER[entry.group]())(program, io);
      done.add(entry.group);
    } else {
      // A hidden option, so the listing shows "[options]" as for the full command.
      program.command(entry.name).description(entry.description).addOption(new Option('--options').hideHelp());
    }
  }
  return program;
}

/**
 * Runs the CLI and returns its exit code: 0 on success, 2 on a caller mistake (bad input,
 * bad flag, unreadable file, infeasible budget), 1 on an internal error. Never exits itself.
 */
export async function runCli(argv: readonly string[], io: CliIo = processIo): Promise<number> {
  const program = await buildProgram(io, commandOf(argv));
  try {
    await program.parseAsync([...argv], { from: 'user' });
    return 0;
  } catch (error) {
    if (error instanceof CommanderError) {
      if (error.code === 'commander.helpDisplayed' || error.code === 'commander.version' || error.exitCode === 0) return 0;
      // No command: commander has shown the help on stderr; its message is only "(outputHelp)".
      if (error.code === 'commander.help') return 2;
      io.stderr(`rollout-budget: ${flagValueMessage(error.message)}\n`);
      return 2;
    }
    if (error instanceof RolloutBudgetError) {
      io.stderr(`rollout-budget: ${printable(withFieldNames(error, flagOfField).message)}\n`);
      return error.exitCode;
    }
    io.stderr(`rollout-budget: internal error: ${(error as Error).stack ?? String(error)}\n`);
    return 1;
  }
}

/**
 * A message with its control characters written as \u escapes: a message quotes its input (a
 * malformed line, as JSON.parse's own words do), and an ESC or BEL from a file reached the
 * terminal raw (`\x1b]0;...\x07` retitled it; an escape sequence can do worse). Lines stay lines.
 */
export function printable(message: string): string {
  return message.replace(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}
