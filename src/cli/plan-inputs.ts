import { parsePlan } from '../executor/planfile.js';
import type { Candidate, Plan } from '../plan/types.js';
import { readInput, type CliIo } from './io.js';
import { readPrompts } from './prompts-input.js';

/** A plan file and its prompts file, as `execute` and `grade` read them. */
export interface PlanInputs {
  readonly plan: Plan;
  /** The prompts by id. */
  readonly prompts: Map<string, Candidate>;
  /** Where each came from, for messages about one prompt or group (`file:line`). */
  readonly origin: { plan: string; prompts: string; promptLines: Map<string, string> };
}

/** Reads and checks `--plan` and `--prompts` (paths, or `-` for stdin). */
export async function readPlanInputs(io: CliIo, planPath: string, promptsPath: string): Promise<PlanInputs> {
  const planInput = await readInput(io, planPath);
  const plan = parsePlan(planInput.text, planInput.name);
  const { parsed, name } = await readPrompts(io, promptsPath);
  return {
    plan,
    prompts: new Map(parsed.candidates.map((c) => [c.id, c])),
    // promptLines read on first use (io/formats.ts builds that map lazily).
    origin: {
      plan: planInput.name,
      prompts: name,
      get promptLines() {
        return parsed.lines;
      },
    },
  };
}
