import { badInput, badOption, counted, quote } from '../errors.js';
import { groupId, groupSeed } from './groups.js';
import { joinChunks, type PlanChunk } from './byte-chunk.js';
import { countWithoutLimit, planJsonBytes, planJsonlChunks } from './serialize.js';
import type { Candidate, Plan } from './types.js';

/**
 * Plan exports for trainers and batch runners. Every format carries, per group, the same
 * `group_id` and `seed`; rollout j of a group uses seed + j (vLLM's rule for a request with
 * n > 1, and slime's), so a trainer, `vllm run-batch` and `rollout-budget execute` draw the
 * same samples from the same server.
 */
export const PLAN_FORMATS = ['json', 'jsonl', 'vllm-batch', 'sglang'] as const;
export type PlanFormat = (typeof PLAN_FORMATS)[number];

export { groupId, groupSeed } from './groups.js';

/** One group of a plan: what every export writes per allocation with n > 0. */
export interface PlanGroup {
  group_id: string;
  prompt_id: string;
  n: number;
  max_tokens: number | null;
  /** The seed of the group's first new rollout: group seed + first_rollout. */
  seed: number;
  /** Present when the prompt already had rollouts at this step (a later round). */
  first_rollout?: number;
}

export function planGroups(plan: Plan): PlanGroup[] {
  return plan.allocations
    .filter((a) => a.n > 0)
    .map((a) => ({
      group_id: groupId(plan.step, a.prompt_id),
      prompt_id: a.prompt_id,
      n: a.n,
      max_tokens: a.max_tokens,
      seed: (groupSeed(plan.seed, plan.step, a.prompt_id) + (a.first_rollout ?? 0)) | 0,
      ...(a.first_rollout === undefined ? {} : { first_rollout: a.first_rollout }),
    }));
}

/**
 * max_tokens for groups whose prompt gives none, in exports and `execute` (`--max-tokens`).
 * Servers otherwise stop at their own default: vLLM 16 tokens on /v1/completions
 * (vllm/sampling_params.py `max_tokens: int | None = 16`), SGLang 128
 * (sglang/srt/sampling/sampling_params.py `max_new_tokens = 128`).
 */
export const DEFAULT_MAX_TOKENS = 4096;

/** The prompts field that holds a prompt's text unless a caller names another (`--prompt-field`). */
export const DEFAULT_PROMPT_FIELD = 'prompt';

/** What is sent for a prompt: a text string (completions) or `messages` (chat). */
export type PromptPayload = { kind: 'completions'; prompt: string } | { kind: 'chat'; messages: unknown[] };

/**
 * A candidate's payload from its text field (`field`, default "prompt") or `messages`; throws
 * naming `where` (the prompt's file:line and id), and names a text field `--prompt-field` could take.
 */
export function payloadOf(c: Candidate, where: string, field = DEFAULT_PROMPT_FIELD): PromptPayload {
  const text = c[field];
  if (typeof text === 'string' && text.length > 0) return { kind: 'completions', prompt: text };
  if (Array.isArray(c.messages) && c.messages.length > 0) return { kind: 'chat', messages: c.messages };
  throw badInput(where, `needs a ${quote(field)} string or a "messages" array to send${promptFieldHint(c, field)}`);
}

/** Text fields datasets use for the prompt; a prompt with one of them is pointed to `--prompt-field`. */
const TEXT_FIELDS = ['problem', 'question', 'prompt', 'input', 'text', 'query'];

/** "; it has "problem": pass --prompt-field problem" when the candidate has another text field, else "". */
export function promptFieldHint(c: Candidate, field: string): string {
  // The field there, but not a non-empty string (a number, an empty string): say what it is.
  const value = c[field];
  const got = value === undefined ? 'neither' : `${quote(field)} ${quote(value).slice(0, 80)}, not a non-empty string`;
  const other = TEXT_FIELDS.find((k) => k !== field && typeof c[k] === 'string');
  return `, got ${got}${other === undefined ? '' : `; it has ${quote(other)}: pass --prompt-field ${other}`}`;
}

/** Options of the request-shaped exports. */
export interface ExportOptions {
  /** Model name written into vllm-batch bodies. */
  readonly model?: string;
  /** Candidates by id, for the text of vllm-batch and sglang requests. */
  readonly candidates?: ReadonlyMap<string, Candidate>;
  /** The field that holds a prompt's text (default "prompt"). */
  readonly promptField?: string;
  /** max_tokens for groups with none (default DEFAULT_MAX_TOKENS). */
  readonly maxTokens?: number;
  /** Each prompt's place (`file:line`) by id, for error messages. */
  readonly promptLines?: ReadonlyMap<string, string>;
}

/** Formats a plan; `json` is the plan itself (unchanged). */
export function formatPlan(plan: Plan, format: PlanFormat, options: ExportOptions = {}): string {
  return joinChunks(planChunks(plan, format, options));
}

/**
 * formatPlan's text in chunks, for writing a large plan without holding its whole text:
 * `json` and `jsonl` are written from the plan's columns as UTF-8 bytes (plan/serialize.ts),
 * each chunk valid until the next is asked for.
 */
export function planChunks(plan: Plan, format: PlanFormat, options: ExportOptions = {}): Iterable<PlanChunk> {
  switch (format) {
    case 'json':
      return planJsonBytes(plan);
    case 'jsonl':
      return planJsonlChunks(plan, groupLines);
    case 'vllm-batch':
      return [vllmBatch(plan, options)];
    case 'sglang':
      return [`${JSON.stringify(sglangRequest(plan, options), null, 2)}\n`];
    default:
      throw badOption(`--format must be one of ${PLAN_FORMATS.join(', ')}, got ${quote(format)}`);
  }
}

/** Groups of a plan whose max_tokens is null (no limit from the prompt): request exports fill the default. */
export function groupsWithoutLimit(plan: Plan): number {
  return countWithoutLimit(plan);
}

/** A group's max_tokens in a request export (vllm-batch, sglang): its own, else the default. */
function limitOf(g: PlanGroup, options: ExportOptions): number {
  return g.max_tokens ?? options.maxTokens ?? DEFAULT_MAX_TOKENS;
}

/**
 * One header line ({version, step, seed, policy, value, budget, totals, warnings}), then one line
 * per group. `max_tokens` is the plan's (null when the prompt gives none and `plan --max-tokens`
 * was not given): a trainer reading this format applies its own response length then (verl
 * `response_length`, slime `rollout_max_response_len`), which a filled default would override.
 */
export function planJsonl(plan: Plan): string {
  return joinChunks(planJsonlChunks(plan, groupLines));
}

/** planGroups as JSONL lines (no newlines). */
function groupLines(plan: Plan): string[] {
  return planGroups(plan).map((g) => JSON.stringify(g));
}

/** The warning a request export gives when it fills max_tokens. */
export function defaultLimitWarning(groups: number, options: ExportOptions = {}): string {
  return `${counted(groups, 'planned prompt')} no max_tokens (none in the prompts file): the export uses ${options.maxTokens ?? DEFAULT_MAX_TOKENS} (--max-tokens)`;
}

function candidateOf(options: ExportOptions, id: string): Candidate {
  const c = options.candidates?.get(id);
  if (c === undefined) throw badOption(`the plan's prompt ${quote(id)} is not in the prompts file`);
  return c;
}

function whereOf(options: ExportOptions, id: string): string {
  return `${options.promptLines?.get(id) ?? 'prompts'}: prompt ${quote(id)}`;
}

/**
 * The OpenAI batch JSONL that `vllm run-batch -i` reads: one POST to `/v1/chat/completions` per
 * group (the endpoint run-batch serves for generation, vllm/entrypoints/openai/run_batch.py;
 * it has no /v1/completions), `custom_id` = group id, `body` with the messages (a prompt string
 * becomes one user message), n, the group seed (vLLM seeds choice j with seed + j), max_tokens
 * (always) and `return_token_ids` (token counts per choice, vLLM ≥ 0.10.2).
 */
export function vllmBatch(plan: Plan, options: ExportOptions): string {
  if (options.model === undefined) throw badOption('--format vllm-batch needs --model <name> for the request bodies');
  const lines = planGroups(plan).map((g) => {
    const payload = payloadOf(candidateOf(options, g.prompt_id), whereOf(options, g.prompt_id), options.promptField);
    const messages = payload.kind === 'chat' ? payload.messages : [{ role: 'user', content: payload.prompt }];
    return JSON.stringify({
      custom_id: g.group_id,
      method: 'POST',
      url: '/v1/chat/completions',
      body: { model: options.model, messages, n: g.n, seed: g.seed, max_tokens: limitOf(g, options), return_token_ids: true },
    });
  });
  return lines.length === 0 ? '' : `${lines.join('\n')}\n`;
}

/**
 * One SGLang native `/generate` request that SGLang accepts for any mix of n: one entry per
 * rollout (`text`, `rid` = the rollout id `<group id>#<j>`, and a `sampling_params` entry with
 * `sampling_seed` = group seed + j and `max_new_tokens`), so every entry has n = 1. SGLang
 * refuses a batch whose entries differ in n ("The parallel_sample_num should be the same for
 * all samples in sample params.", sglang/srt/managers/io_struct.py) and would give one seed to all
 * n samples of an entry. Needs prompt strings: /generate takes raw text, not chat messages.
 */
export function sglangRequest(plan: Plan, options: ExportOptions): Record<string, unknown> {
  const text: string[] = [];
  const rid: string[] = [];
  const params: Record<string, unknown>[] = [];
  for (const g of planGroups(plan)) {
    const payload = payloadOf(candidateOf(options, g.prompt_id), whereOf(options, g.prompt_id), options.promptField);
    if (payload.kind !== 'completions') {
      throw badOption(`--format sglang sends raw text: prompt ${quote(g.prompt_id)} has "messages" but no ${quote(options.promptField ?? DEFAULT_PROMPT_FIELD)} string (use --format vllm-batch for chat prompts)`);
    }
    const first = g.first_rollout ?? 0;
    for (let j = 0; j < g.n; j++) {
      text.push(payload.prompt);
      rid.push(`${g.group_id}#${first + j}`);
      params.push({ max_new_tokens: limitOf(g, options), sampling_seed: (g.seed + j) | 0 });
    }
  }
  return { text, rid, sampling_params: params };
}
