/**
 * Every command of the CLI, in the order `--help` lists them, with the one-line description
 * its registration uses, and the group of commands registered together (one module each).
 * The CLI registers in full only the group of the command it runs and lists the others by
 * these lines, so `--help` and a small `plan` do not load the executor, the replay, the
 * service or the report (main.ts).
 */
export type CommandGroup = 'state' | 'demo' | 'serve' | 'executor' | 'replay';

export const COMMANDS: readonly { readonly name: string; readonly group: CommandGroup; readonly description: string }[] = [
  { name: 'plan', group: 'state', description: 'write an allocation plan for candidate prompts (one round of a step)' },
  { name: 'observe', group: 'state', description: 'apply rollout results to the state (one transaction, idempotent)' },
  { name: 'inspect', group: 'state', description: 'show the state, or one prompt\'s posterior' },
  { name: 'backup', group: 'state', description: 'copy a SQLite state, consistent while others write it (with each trainer checkpoint), or into a PostgreSQL schema' },
  { name: 'demo', group: 'demo', description: 'plan (in rounds) and observe the first steps of the embedded real run (One-Shot-RLVR), against its logged uniform-8 groups' },
  { name: 'serve', group: 'serve', description: 'serve plan/observe over HTTP (JSON) or stdio (NDJSON) on a SQLite or PostgreSQL state' },
  { name: 'execute', group: 'executor', description: 'generate a plan\'s rollouts on OpenAI-compatible servers, grade them, write results JSONL' },
  { name: 'loop', group: 'executor', description: 'plan → execute → observe for N steps, without a trainer' },
  { name: 'sim-server', group: 'executor', description: 'TEST DOUBLE: a simulated OpenAI-compatible inference server on 127.0.0.1 for dry runs (no real model)' },
  { name: 'grade', group: 'executor', description: 'grade an offline batch run (vllm run-batch output) into results JSONL for observe' },
  { name: 'replay', group: 'replay', description: 'score allocation policies side by side on a logged run' },
  { name: 'simulate', group: 'replay', description: 'score allocation policies in a closed-loop simulated pool (truth known: oracle included)' },
];

/** A command's description line. */
export function describe(name: string): string {
  const entry = COMMANDS.find((c) => c.name === name);
  if (entry === undefined) throw new Error(`no command "${name}" in cli/catalog.ts`);
  return entry.description;
}

/** The command an argument list runs (`help <command>` counts as it), or undefined. */
export function commandOf(argv: readonly string[]): string | undefined {
  const first = argv.find((a) => !a.startsWith('-'));
  if (first === 'help') return argv[argv.indexOf(first) + 1];
  return first;
}
