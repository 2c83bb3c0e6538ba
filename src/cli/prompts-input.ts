import { parsePromptsAt, parsePromptsFile, type ParsedPrompts } from '../io/formats.js';
import type { CliIo } from './io.js';

/**
 * Reads and checks `--prompts`, a path or stdin for '-' (io/formats.ts): a file a piece at a
 * time, so its text does not live on beside the prompts. `name` is the one errors use.
 */
export async function readPrompts(io: CliIo, path: string): Promise<{ parsed: ParsedPrompts; name: string }> {
  if (path === '-') return { parsed: parsePromptsAt(await io.readStdin(), '<stdin>'), name: '<stdin>' };
  return { parsed: parsePromptsFile(path), name: path };
}
