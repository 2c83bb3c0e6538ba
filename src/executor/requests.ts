import { badInput, badOption, quote } from '../errors.js';
import { DEFAULT_PROMPT_FIELD, promptFieldHint } from '../plan/exports.js';
import type { Candidate } from '../plan/types.js';
import type { ServerProfile } from './profiles.js';
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
  /** The server's finish_reason when it was not stop/length (finish.ts), else null. */
  serverReason: string | null;
  /** An aborted unit whose text may be continued next step. */
  resumable: boolean;
  /** The server sent reasoning text for it, which is not kept (client.ts ChoiceSink.reasoning): its text cannot be continued. */
  reasoned: boolean;
  startedAt: number;
  latencyMs: number | null;
}

export function freshUnit(groupId: string, promptId: string, seed: number, j: number): Unit {
  return {
    rollout_id: `${groupId}#${j}`, prompt_id: promptId, seed: seed + j, baseText: '', baseTokens: 0, resumed: false,
    text: '', tokens: 0, newTokens: 0, state: 'queued', finish: null, serverReason: null, resumable: true, reasoned: false, startedAt: 0, latencyMs: null,
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

/** The text to send for a prompt: its `field` string (default "prompt"), or undefined. */
export function promptText(prompt: Candidate, field = DEFAULT_PROMPT_FIELD): string | undefined {
  const v = prompt[field];
  return typeof v === 'string' && v.length > 0 ? v : undefined;
}

/**
 * The API a prompt is sent with; throws naming `where` (the prompt's file:line and id) on a
 * mismatch, and suggests `--prompt-field` when the prompt has one text field the flag could name.
 */
export function apiFor(prompt: Candidate, forced: Api | undefined, where: string, field = DEFAULT_PROMPT_FIELD): Api {
  const hasText = promptText(prompt, field) !== undefined;
  const hasMessages = Array.isArray(prompt.messages) && prompt.messages.length > 0;
  if (!hasText && !hasMessages) throw badInput(where, `needs a ${quote(field)} string or a "messages" array to send${promptFieldHint(prompt, field)}`);
  if (forced === 'completions' && !hasText) throw badInput(where, `--api completions needs a ${quote(field)} string; the prompt has only "messages"`);
  if (forced !== undefined) return forced;
  return hasMessages ? 'chat' : 'completions';
}

/** What a request is built from. */
export interface RequestSpec {
  readonly prompt: Candidate;
  readonly api: Api;
  readonly model: string;
  readonly run: readonly Unit[];
  readonly maxTokens: number | null;
  readonly temperature?: number;
  readonly extra?: Readonly<Record<string, unknown>>;
  readonly server: ServerProfile;
  readonly promptField?: string;
}

/**
 * Request fields the executor sets itself, and what sets them instead. --extra-body is merged
 * last, so one of these there would override what the plan and the results rely on: `n` above
 * a run's length makes the server generate choices that are thrown away (n: 1e9 stalls it);
 * one `seed` for every request gives the runs of a split group the same samples; a
 * `max_tokens` (or vLLM's `max_completion_tokens`, which wins over it) undoes the plan's token
 * budget; without `stream` the answer is not read.
 */
const EXECUTOR_FIELDS: Readonly<Record<string, string>> = {
  n: "a request's n is its share of a group (the plan's n, split by --request-n)",
  seed: "every rollout has its own seed, the group's seed + j, so that a group's rollouts differ and an aborted one resumes",
  model: 'from --model',
  prompt: 'from the prompts file',
  messages: 'from the prompts file',
  max_tokens: "from the plan's max_tokens (--max-tokens where it gives none)",
  max_completion_tokens: "from the plan's max_tokens (--max-tokens where it gives none)",
  stream: 'answers are read as a stream, with the usage at its end',
  stream_options: 'answers are read as a stream, with the usage at its end',
};

/** What is wrong with an --extra-body that sets a field the executor sets (EXECUTOR_FIELDS), after "--extra-body "; undefined when nothing is. */
export function extraBodyConflict(extra: Readonly<Record<string, unknown>>): string | undefined {
  for (const key of Object.keys(extra)) {
    const owner = EXECUTOR_FIELDS[key];
    if (owner !== undefined) return `sets "${key}", which execute sets itself (${owner}): leave it out`;
  }
  return undefined;
}

/** Refuses an --extra-body that sets a field the executor sets, or a temperature other than --temperature's. */
export function checkExtraBody(extra: Readonly<Record<string, unknown>>, temperature?: number): void {
  const conflict = extraBodyConflict(extra);
  if (conflict !== undefined) throw badOption(`--extra-body ${conflict}`);
  if (temperature !== undefined && 'temperature' in extra && extra.temperature !== temperature) {
    throw badOption(`--extra-body sets "temperature" to ${quote(extra.temperature)} and --temperature to ${temperature}: give one`);
  }
}

/**
 * The request body for a run of units of one prompt: n = run length, seed = the first unit's
 * seed (vLLM seeds choice i with seed + i; other profiles send runs of one), max_tokens = the
 * plan's, minus what a resumed unit already has, and the profile's fields. A resumed unit
 * continues its text: appended to the prompt for completions, a final assistant message with
 * `continue_final_message` for chat (vLLM, SGLang). `extra` (--extra-body) is merged last.
 */
export function requestBody(spec: RequestSpec): Record<string, unknown> {
  const { prompt, api, run, maxTokens, temperature } = spec;
  const first = run[0]!;
  const prefix = first.resumed ? first.baseText : '';
  const done = first.resumed ? (first.baseTokens ?? 0) : 0;
  const body: Record<string, unknown> = {
    model: spec.model,
    n: run.length,
    seed: first.seed,
    stream: true,
    stream_options: { include_usage: true },
    ...spec.server.fields[api],
    ...(maxTokens === null ? {} : { max_tokens: Math.max(1, maxTokens - done) }),
    ...(temperature === undefined ? {} : { temperature }),
  };
  const text = promptText(prompt, spec.promptField);
  if (api === 'completions') {
    body.prompt = `${text ?? ''}${prefix}`;
  } else {
    const messages = Array.isArray(prompt.messages) ? [...(prompt.messages as unknown[])] : [{ role: 'user', content: text ?? '' }];
    if (prefix !== '') {
      messages.push({ role: 'assistant', content: prefix });
      body.continue_final_message = true;
      body.add_generation_prompt = false;
    }
    body.messages = messages;
  }
  return { ...body, ...spec.extra };
}
