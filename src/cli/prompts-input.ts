import { parsePromptsAt, parsePromptsFile, type ParsedPrompts } from '../io/formats.js';
import { badInput } from '../errors.js';
import type { CliIo } from './io.js';

/**
 * Reads and checks `--prompts`, a path or stdin for '-' (io/formats.ts): a file a piece at a
 * time, so its text does not live on beside the prompts. `name` is the one errors use.
 */
export async function readPrompts(io: CliIo, path: string): Promise<{ parsed: ParsedPrompts; name: string }> {
  const name = path === '-' ? '<stdin>' : path;
  const parsed = path === '-' ? parsePromptsAt(await io.readStdin(), name) : parsePromptsFile(path);
  requirePrompts(parsed.candidates.length, name);
  return { parsed, name };
}

/**
 * An empty prompts file (or stdin) is exit 2: `plan` wrote an empty plan and a new state file,
 * exit 0, and `loop` ran its steps on nothing, saying the budget was left unspent because every
 * prompt was at max_n.
 */
export function requirePrompts(count: number, name: string): void {
  if (count === 0) throw badInput(name, 'no prompts: the file holds no line (one JSON object a line, {"id": ...})');
}
