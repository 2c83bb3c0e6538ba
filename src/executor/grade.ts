import { badInput, quote } from '../errors.js';
import { parseJsonl } from '../io/jsonl.js';
import { planGroups, type PlanGroup } from '../plan/exports.js';
import type { Candidate, Plan } from '../plan/types.js';
import { promptMetaFields } from '../store/meta.js';
import { TOO_LONG, tokensOf } from './client.js';
import { CONTEXT_LENGTH, describeFinishCounts, finishOutcome, isPlainFinish } from './finish.js';
import { promptText } from './requests.js';
import { mergeCounts } from './summary.js';
import type { ExecutedRollout, InputOrigin } from './types.js';
import type { Verifier, VerifyItem } from './verify/verifiers.js';

/**
 * `grade`: results from an offline batch run. Reads the output file of `vllm run-batch` (one line
 * per request: `{id, custom_id, response: {status_code, request_id, body}, error}`, body a
 * `chat.completion` or `text_completion`; vllm/entrypoints/openai/run_batch.py
 * `BatchRequestOutput`), matches each line to the plan's group by `custom_id` (= group id, as
 * `plan --format vllm-batch` wrote it), and writes one results line per planned rollout, as
 * `execute` does: choice i of group g is rollout `<g>#<first_rollout + i>` with seed
 * group seed + first_rollout + i (vLLM seeds choice i with seed + i); tokens from the choice's
 * `token_ids` (or logprobs; a single choice: usage.completion_tokens); finish reasons mapped
 * as in finish.ts. A failed request (an `error`, or status ≠ 200) and a choice missing from an
 * answer are written as aborted ("abort", not observed), so a re-run of them can be graded later.
 */
export interface GradeOptions {
  readonly verifier: Verifier;
  /** The prompts field that held the text (for the verifier's `prompt`), default "prompt". */
  readonly promptField?: string;
  readonly origin?: InputOrigin;
}

export interface GradeSummary {
  /** Lines of the batch output. */
  requests: number;
  /** Lines with an error or an HTTP status other than 200 (their rollouts: "abort"). */
  failed_requests: number;
  /** The first failure's message, for the summary line. */
  first_error: string | null;
  /** Choices an answer left out (written as abort), and where the first such answer was. */
  missing_choices: number;
  first_missing_choices: string | null;
  /** Plan groups no line answered (nothing written for them). */
  missing_groups: number;
  planned: number;
  /** Rollouts graded (finished). */
  rollouts: number;
  aborted: number;
  tokens: number;
  tokens_unknown: number;
  mean_reward: number | null;
  finish_reasons: Record<string, number>;
}

export interface GradeReport {
  results: ExecutedRollout[];
  summary: GradeSummary;
}

interface Pending {
  readonly row: ExecutedRollout;
  readonly item: VerifyItem | null;
}

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => v !== null && typeof v === 'object' && !Array.isArray(v);

/** Grades a `vllm run-batch` output against the plan it ran; see the module comment. O(lines + choices). */
export async function gradeBatchOutput(text: string, name: string, plan: Plan, prompts: ReadonlyMap<string, Candidate>, options: GradeOptions): Promise<GradeReport> {
  const origin = options.origin ?? {};
  const groups = new Map<string, PlanGroup>();
  const at = new Map(plan.allocations.map((a, i) => [a.prompt_id, i]));
  planGroups(plan).forEach((g) => {
    const prompt = prompts.get(g.prompt_id);
    if (prompt === undefined) throw badInput(`${origin.plan ?? 'plan'}: allocations[${at.get(g.prompt_id)}]`, `"prompt_id" ${quote(g.prompt_id)} is not in ${origin.prompts ?? 'the prompts'}`);
    options.verifier.check(prompt, `${origin.promptLines?.get(g.prompt_id) ?? origin.prompts ?? 'prompts'}: prompt ${quote(g.prompt_id)}`);
    groups.set(g.group_id, g);
  });
  const seen = new Map<string, number>();
  const pending: Pending[] = [];
  const counts: Record<string, number> = {};
  let failed = 0;
  let firstError: string | null = null;
  let missingChoices = 0;
  let firstMissing: string | null = null;
  let lines = 0;
  const row = (g: PlanGroup, index: number, finish: ExecutedRollout['finish_reason'], tokens: number | null, serverReason: string | null): ExecutedRollout => {
    const prompt = prompts.get(g.prompt_id)!;
    return {
      prompt_id: g.prompt_id, step: plan.step, rollout_id: `${g.group_id}#${(g.first_rollout ?? 0) + index}`, reward: 0,
      ...(tokens === null ? {} : { tokens }), finish_reason: finish, ...(serverReason === null ? {} : { server_finish_reason: serverReason }),
      ...promptMetaFields(prompt), seed: (g.seed + index) | 0,
    };
  };
  const abortAll = (g: PlanGroup, from: Set<number>, serverReason: string | null = null) => {
    for (let i = 0; i < g.n; i++) if (!from.has(i)) pending.push({ row: row(g, i, 'abort', null, serverReason), item: null });
  };

  for (const { where, line, value } of parseJsonl(text, name)) {
    lines++;
    // vLLM writes both fields on every line (null when unused); a line with neither is not an
    // output, and one with a request's fields is the batch's input given in its place.
    if (value.response === undefined && value.error === undefined) {
      const request = value.body !== undefined || value.url !== undefined;
      throw badInput(where, `no "response" and no "error": ${request ? 'this is a request (it has "url" or "body"), a line of the batch input; pass the file `vllm run-batch -o` wrote, not its -i' : 'not a line of a `vllm run-batch` output'}`);
    }
    const id = value.custom_id;
    if (typeof id !== 'string') throw badInput(where, `"custom_id" must be a string (a group id "<step>/<prompt id>"), got ${quote(id)}`);
    const g = groups.get(id);
    if (g === undefined) throw badInput(where, `"custom_id" ${quote(id)} is not a group of ${origin.plan ?? 'the plan'} (step ${plan.step}); was the batch built from another plan?`);
    const before = seen.get(id);
    if (before !== undefined) throw badInput(where, `"custom_id" ${quote(id)} repeats line ${before}`);
    seen.set(id, line);
    const response = value.response;
    const status = isObj(response) ? response.status_code : undefined;
    const body = isObj(response) ? response.body : undefined;
    if ((value.error !== null && value.error !== undefined) || (status !== undefined && status !== 200) || !isObj(body)) {
      failed++;
      firstError ??= `${where}: ${value.error === null || value.error === undefined ? `status ${quote(status)}` : JSON.stringify(value.error).slice(0, 200)}`;
      // The prompt too long for the server's context with its max_tokens: marked as execute marks it.
      const tooLong = status === 400 && TOO_LONG.test(JSON.stringify(body ?? value.error ?? ''));
      if (tooLong) counts[CONTEXT_LENGTH] = (counts[CONTEXT_LENGTH] ?? 0) + g.n;
      abortAll(g, new Set(), tooLong ? CONTEXT_LENGTH : null);
      continue;
    }
    const choices = body.choices;
    if (!Array.isArray(choices)) throw badInput(where, `"response.body.choices" must be an array, got ${quote(choices)}`);
    // Another object would be read as a completion without text: every rollout graded 0, silently.
    if (body.object !== undefined && body.object !== 'chat.completion' && body.object !== 'text_completion') {
      throw badInput(where, `"response.body.object" must be "text_completion" or "chat.completion" (vLLM's /v1/completions or /v1/chat/completions), got ${quote(body.object)}`);
    }
    const chat = body.object === 'chat.completion' || (body.object === undefined && isObj(choices[0]) && isObj(choices[0].message));
    const usage = isObj(body.usage) && typeof body.usage.completion_tokens === 'number' ? body.usage.completion_tokens : null;
    if (usage !== null && !(Number.isSafeInteger(usage) && usage >= 0)) {
      throw badInput(where, `"response.body.usage.completion_tokens" must be a non-negative integer, got ${quote(usage)}`);
    }
    const present = new Set<number>();
    choices.forEach((raw: unknown, k: number) => {
      const field = `"response.body.choices[${k}]`;
      if (!isObj(raw)) throw badInput(where, `${field}" must be an object, got ${quote(raw)}`);
      const index = raw.index;
      if (typeof index !== 'number' || !Number.isInteger(index) || index < 0 || index >= g.n) {
        throw badInput(where, `${field}.index" must be an integer in [0, ${g.n}) (the plan's n for ${quote(id)}), got ${quote(index)}`);
      }
      if (present.has(index)) throw badInput(where, `${field}.index" ${index} repeats`);
      present.add(index);
      const content = chat ? (isObj(raw.message) ? raw.message.content : undefined) : raw.text;
      // A chat message's content may be null (no answer: graded as one); a completion always has its text.
      if (!chat && typeof content !== 'string') throw badInput(where, `${field}.text" must be a string, got ${quote(content)}`);
      // Another value (a number, an object) was graded as an empty answer: a wrong one, silently.
      if (chat && content !== null && content !== undefined && typeof content !== 'string') {
        throw badInput(where, `${field}.message.content" must be a string or null, got ${quote(content)}`);
      }
      if (raw.finish_reason !== undefined && raw.finish_reason !== null && typeof raw.finish_reason !== 'string') {
        throw badInput(where, `${field}.finish_reason" must be a string or null, got ${quote(raw.finish_reason)}`);
      }
      const response = typeof content === 'string' ? content : '';
      const tokens = tokensOf(raw, chat) ?? (choices.length === 1 ? usage : null);
      const reason = typeof raw.finish_reason === 'string' ? raw.finish_reason : 'null';
      if (!isPlainFinish(reason)) counts[reason] = (counts[reason] ?? 0) + 1;
      const outcome = finishOutcome(reason);
      const serverReason = isPlainFinish(reason) ? null : reason;
      if (outcome.kind === 'aborted') {
        pending.push({ row: row(g, index, 'abort', tokens, serverReason), item: null });
        return;
      }
      const r = row(g, index, outcome.written, tokens, serverReason);
      const prompt = prompts.get(g.prompt_id)!;
      const input = chat && Array.isArray(prompt.messages) ? (prompt.messages as unknown[]) : (promptText(prompt, options.promptField) ?? null);
      pending.push({ row: r, item: { rollout_id: r.rollout_id, prompt_id: g.prompt_id, prompt, response, finish_reason: outcome.written, input } });
    });
    // Choices the server left out (a body with "choices": []) are aborted, as before; the summary
    // now counts them and says where the first was.
    if (present.size < g.n) {
      missingChoices += g.n - present.size;
      firstMissing ??= where;
    }
    abortAll(g, present);
  }

  const graded = pending.filter((p) => p.item !== null);
  const rewards = await options.verifier.verify(graded.map((p) => p.item!));
  graded.forEach((p, i) => void (p.row.reward = rewards[i]!));
  const results = pending.map((p) => p.row);
  const planned = [...groups.values()].reduce((s, g) => s + g.n, 0);
  const known = results.filter((r) => r.tokens !== undefined);
  return {
    results,
    summary: {
      requests: lines, failed_requests: failed, first_error: firstError, missing_groups: groups.size - seen.size, missing_choices: missingChoices, first_missing_choices: firstMissing, planned,
      rollouts: graded.length, aborted: results.length - graded.length,
      tokens: known.reduce((s, r) => s + r.tokens!, 0), tokens_unknown: results.length - known.length,
      mean_reward: rewards.length === 0 ? null : Math.round((rewards.reduce((s, x) => s + x, 0) / rewards.length) * 1e4) / 1e4,
      finish_reasons: mergeCounts([counts]),
    },
  };
}

/** The summary `grade` prints on stderr. */
export function gradeSummaryLine(s: GradeSummary): string {
  const parts = [
    `graded ${s.rollouts}/${s.planned} rollouts (aborted ${s.aborted})`,
    `requests ${s.requests}${s.failed_requests > 0 ? ` (failed ${s.failed_requests}: their rollouts written as abort; first: ${s.first_error})` : ''}`,
    `tokens ${s.tokens}${s.tokens_unknown > 0 ? ` (+${s.tokens_unknown} rollouts unreported)` : ''}`,
    `mean reward ${s.mean_reward ?? '-'}`,
  ];
  if (s.missing_groups > 0) parts.push(`${s.missing_groups} plan groups have no line in the batch output (nothing written for them)`);
  if (s.missing_choices > 0) parts.push(`${s.missing_choices} choices missing from their answers (written as abort; first: ${s.first_missing_choices})`);
  if (Object.keys(s.finish_reasons).length > 0) parts.push(`server finish reasons: ${describeFinishCounts(s.finish_reasons)}`);
  return parts.join(', ');
}
