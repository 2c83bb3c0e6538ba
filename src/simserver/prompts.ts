import { badInput, quote } from '../errors.js';
import { parseJsonl } from '../io/jsonl.js';
import { DEFAULT_PROMPT_FIELD, promptFieldHint } from '../plan/exports.js';
import type { Candidate } from '../plan/types.js';
import type { SimPrompt } from './model.js';

/**
 * Reads the prompts the sim-server answers (the same JSONL `execute` sends): the text is the
 * `field` string (default "prompt", `--prompt-field`), or the last user message of `messages`;
 * `ground_truth` is required; `sim_pass_rate` in [0, 1] optionally fixes the prompt's pass rate.
 */
export function parseSimPrompts(text: string, name: string, field = DEFAULT_PROMPT_FIELD): SimPrompt[] {
  return parseJsonl(text, name).map(({ where, value }) => {
    const id = value.id;
    if (typeof id !== 'string' || id === '') throw badInput(where, `"id" must be a non-empty string, got ${quote(id)}`);
    let body: string | undefined;
    if (typeof value[field] === 'string') body = value[field] as string;
    else if (Array.isArray(value.messages)) {
      const user = [...(value.messages as { role?: unknown; content?: unknown }[])].reverse().find((m) => m?.role === 'user');
      if (typeof user?.content === 'string') body = user.content;
    }
    if (body === undefined) {
      // A field there but not a string ("prompt": 5) is named with its value (promptFieldHint).
      throw badInput(where, `needs a ${quote(field)} string or "messages" with a user message${promptFieldHint(value as Candidate, field)}`);
    }
    const gt = value.ground_truth;
    if (typeof gt !== 'string' && typeof gt !== 'number') throw badInput(where, `"ground_truth" must be a string or number, got ${quote(gt)}`);
    const p = value.sim_pass_rate;
    if (p !== undefined && (typeof p !== 'number' || !(p >= 0 && p <= 1))) throw badInput(where, `"sim_pass_rate" must be a number in [0, 1], got ${quote(p)}`);
    return { id, text: body, groundTruth: String(gt), ...(p === undefined ? {} : { passRate: p as number }) };
  });
}
