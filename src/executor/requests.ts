import { badInput, quote } from '../errors.js';
import type { Candidate } from '../plan/types.js';
import type { Api } from './types.js';

/** One rollout of a step: fresh (seed = group seed + j) or resumed from a stored partial. */
export interface Unit {
  readonly rollout_id: string;
  readonly prompt_id: string;
  readonly seed: number;
  /** Text and tokens carried over from an earlier step ('' and 0 for a fresh rollout). */
  readonly baseText: string;
  readonly baseTokens: number | null;
  readonly resumed: boolean;
  text: string;
  tokens: number | null;
  /** Tokens generated in this run. */
  newTokens: number;
  state: 'queued' | 'running' | 'done' | 'aborted' | 'not-launched';
  finish: 'stop' | 'length' | null;
  startedAt: number;
  latencyMs: number | null;
}

export function freshUnit(groupId: string, promptId: string, seed: number, j: number): Unit {
  return {
    rollout_id: `${groupId}#${j}`, prompt_id: promptId, seed: seed + j, baseText: '', baseTokens: 0, resumed: false,
    text: '', tokens: 0, newTokens: 0, state: 'queued', finish: null, startedAt: 0, latencyMs: null,
  };
}

/** Splits units into runs of consecutive seeds of at most `max` (one request each: seed, n). */
export function seedRuns(units: readonly Unit[], max: number): Unit[][] {
  const runs: Unit[][] = [];
  for (const u of units) {
    const last = runs[runs.length - 1];
    const prev = last?.[last.length - 1];
    if (last !== undefined && prev !== undefined && !u.resumed && !prev.resumed && u.seed === prev.seed + 1 && last.length < max) {
      last.push(u);
    } else {
      runs.push([u]);
    }
  }
  return runs;
}

/** The API a prompt is sent with, and its payload; throws naming the prompt on a mismatch. */
export function apiFor(prompt: Candidate, forced: Api | undefined, where: string): Api {
  const hasText = typeof prompt.prompt === 'string' && prompt.prompt.length > 0;
  const hasMessages = Array.isArray(prompt.messages) && prompt.messages.length > 0;
  if (!hasText && !hasMessages) throw badInput(where, `prompt ${quote(prompt.id)} needs a "prompt" string or a "messages" array to send, got neither`);
  if (forced === 'completions' && !hasText) throw badInput(where, `--api completions needs a "prompt" string; prompt ${quote(prompt.id)} has only "messages"`);
  if (forced !== undefined) return forced;
  return hasMessages ? 'chat' : 'completions';
}

/**
 * The request body for a run of units of one prompt: n = run length, seed = the first unit's
 * seed (the server seeds choice i with seed + i), max_tokens = the plan's, minus what a
 * resumed unit already has. A resumed unit continues its text: appended to the prompt for
 * completions, a final assistant message with `continue_final_message` for chat (vLLM).
 */
export function requestBody(
  prompt: Candidate,
  api: Api,
  model: string,
  run: readonly Unit[],
  maxTokens: number | null,
  temperature: number | undefined,
  extra: Readonly<Record<string, unknown>> = {},
): Record<string, unknown> {
  const first = run[0]!;
  const prefix = first.resumed ? first.baseText : '';
  const done = first.resumed ? (first.baseTokens ?? 0) : 0;
  const body: Record<string, unknown> = {
    model,
    n: run.length,
    seed: first.seed,
    stream: true,
    stream_options: { include_usage: true },
    return_token_ids: true,
    ...(maxTokens === null ? {} : { max_tokens: Math.max(1, maxTokens - done) }),
    ...(temperature === undefined ? {} : { temperature }),
  };
  if (api === 'completions') {
    body.prompt = `${String(prompt.prompt)}${prefix}`;
  } else {
    const messages = Array.isArray(prompt.messages) ? [...(prompt.messages as unknown[])] : [{ role: 'user', content: String(prompt.prompt) }];
    if (prefix !== '') {
      messages.push({ role: 'assistant', content: prefix });
      body.continue_final_message = true;
      body.add_generation_prompt = false;
    }
    body.messages = messages;
  }
  return { ...body, ...extra };
}
