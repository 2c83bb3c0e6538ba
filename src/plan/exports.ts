import { badInput, badOption, quote } from '../errors.js';
import { fnv1a } from '../math/hash.js';
import type { Candidate, Plan } from './types.js';

/**
 * Plan exports for trainers and batch runners. Every format carries, per group, the same
 * `group_id` and `seed`; rollout j of a group uses seed + j (vLLM's rule for a request with
 * n > 1, and slime's), so a trainer, `vllm run-batch` and `rollout-budget execute` draw the
 * same samples from the same server.
 */
export const PLAN_FORMATS = ['json', 'jsonl', 'vllm-batch', 'sglang'] as const;
export type PlanFormat = (typeof PLAN_FORMATS)[number];

/** Largest group seed; seed + j stays a non-negative int32 for groups of up to 2^30 rollouts. */
const SEED_MASK = 0x3fffffff;

/**
 * The seed of a prompt's group in a plan: FNV-1a of "runSeed/step/promptId", 30 bits. Stable
 * under reordering or sharding of the plan; rollout j uses groupSeed + j.
 */
export function groupSeed(runSeed: number, step: number, promptId: string): number {
  return fnv1a(`${runSeed}/${step}/${promptId}`) & SEED_MASK;
}

/** The group id a trainer keys a group by (verl `uid`, slime `group_index` lookup). */
export function groupId(step: number, promptId: string): string {
  return `${step}/${promptId}`;
}

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

/** What is sent for a prompt: a `prompt` string (completions) or `messages` (chat). */
export type PromptPayload = { kind: 'completions'; prompt: string } | { kind: 'chat'; messages: unknown[] };

/** A candidate's payload from its `prompt` or `messages` field; throws naming the candidate. */
export function payloadOf(c: Candidate, where: string): PromptPayload {
  if (typeof c.prompt === 'string' && c.prompt.length > 0) return { kind: 'completions', prompt: c.prompt };
  if (Array.isArray(c.messages) && c.messages.length > 0) return { kind: 'chat', messages: c.messages };
  throw badInput(where, `prompt ${quote(c.id)} needs a "prompt" string or a "messages" array to send, got neither`);
}

/** Options of the request-shaped exports. */
export interface ExportOptions {
  /** Model name written into vllm-batch bodies. */
  readonly model?: string;
  /** Candidates by id, for the text of vllm-batch and sglang requests. */
  readonly candidates?: ReadonlyMap<string, Candidate>;
}

/** Formats a plan; `json` is the plan itself (unchanged). */
export function formatPlan(plan: Plan, format: PlanFormat, options: ExportOptions = {}): string {
  switch (format) {
    case 'json':
      return `${JSON.stringify(plan, null, 2)}\n`;
    case 'jsonl':
      return planJsonl(plan);
    case 'vllm-batch':
      return vllmBatch(plan, options);
    case 'sglang':
      return `${JSON.stringify(sglangRequest(plan, options), null, 2)}\n`;
    default:
      throw badOption(`--format must be one of ${PLAN_FORMATS.join(', ')}, got ${quote(format)}`);
  }
}

/** One header line ({version, step, seed, policy, value, budget, totals, warnings}), then one line per group. */
export function planJsonl(plan: Plan): string {
  const { allocations: _omit, ...header } = plan;
  const lines = [JSON.stringify({ type: 'header', ...header })];
  for (const g of planGroups(plan)) lines.push(JSON.stringify(g));
  return `${lines.join('\n')}\n`;
}

function candidateOf(options: ExportOptions, id: string): Candidate {
  const c = options.candidates?.get(id);
  if (c === undefined) throw badOption(`the plan's prompt ${quote(id)} is not in the prompts file`);
  return c;
}

/**
 * The OpenAI batch JSONL that `vllm run-batch -i` reads: one POST per group, `custom_id` =
 * group id, `body` with n, max_tokens and the group seed (vLLM seeds choice j with seed + j).
 */
export function vllmBatch(plan: Plan, options: ExportOptions): string {
  if (options.model === undefined) throw badOption('--format vllm-batch needs --model <name> for the request bodies');
  const lines = planGroups(plan).map((g) => {
    const c = candidateOf(options, g.prompt_id);
    const payload = payloadOf(c, `prompt ${quote(g.prompt_id)}`);
    const body: Record<string, unknown> = {
      model: options.model,
      ...(payload.kind === 'chat' ? { messages: payload.messages } : { prompt: payload.prompt }),
      n: g.n,
      seed: g.seed,
      ...(g.max_tokens === null ? {} : { max_tokens: g.max_tokens }),
    };
    return JSON.stringify({
      custom_id: g.group_id,
      method: 'POST',
      url: payload.kind === 'chat' ? '/v1/chat/completions' : '/v1/completions',
      body,
    });
  });
  return lines.length === 0 ? '' : `${lines.join('\n')}\n`;
}

/**
 * One SGLang native `/generate` request: `text` and `rid` lists with one entry per group and
 * `sampling_params` a list with one entry per prompt (n, max_new_tokens, sampling_seed).
 * Needs `prompt` strings (native /generate takes raw text, not chat messages).
 */
export function sglangRequest(plan: Plan, options: ExportOptions): Record<string, unknown> {
  const groups = planGroups(plan);
  const text = groups.map((g) => {
    const payload = payloadOf(candidateOf(options, g.prompt_id), `prompt ${quote(g.prompt_id)}`);
    if (payload.kind !== 'completions') {
      throw badOption(`--format sglang sends raw text: prompt ${quote(g.prompt_id)} has "messages" but no "prompt" string`);
    }
    return payload.prompt;
  });
  return {
    text,
    rid: groups.map((g) => g.group_id),
    sampling_params: groups.map((g) => ({
      n: g.n,
      sampling_seed: g.seed,
      ...(g.max_tokens === null ? {} : { max_new_tokens: g.max_tokens }),
    })),
  };
}
