/**
 * What a server's finish_reason means for a rollout, decided once for the executor and `grade`.
 *
 * Reasons servers send today: vLLM `stop`, `length`, `abort` (aborted, e.g. by a client or
 * `pause_generation(mode="abort")` during a weight sync), `error` (a request-level internal error)
 * and `repetition` (its repetition detector cut a looping output) — vllm/v1/engine/__init__.py
 * `FINISH_REASON_STRINGS`; SGLang `stop`, `length`, `abort` (a graceful abort) and
 * `content_filter` — sglang/srt/entrypoints/openai/protocol.py `CompletionResponseChoice`.
 *
 * - `stop`, `length`: finished; graded and observed, written as they are.
 * - `repetition`: finished — the policy did produce the looping text, and dropping it would hide a
 *   failure from the posterior — graded and observed, written as `"length"` (cut by the server
 *   before a natural end), with `server_finish_reason: "repetition"`.
 * - `tool_calls`, `function_call`: the model ended its turn (OpenAI's natural ends): written `"stop"`.
 * - `abort`, `error`: aborted — written `"abort"`, not graded, not observed (the core skips
 *   aborted rollouts); a partial text is kept and resumed next step like an over-provisioned one.
 * - anything else (`content_filter`, a reason this code does not know): aborted and not resumed,
 *   since its meaning for the pass rate is unknown; written `"abort"` with the server's reason.
 * Every reason other than stop and length is counted in the run summary (`finish_reasons`).
 */
export type FinishOutcome =
  | { readonly kind: 'finished'; readonly written: 'stop' | 'length' }
  | { readonly kind: 'aborted'; readonly resumable: boolean };

const OUTCOMES: Readonly<Record<string, FinishOutcome>> = {
  stop: { kind: 'finished', written: 'stop' },
  length: { kind: 'finished', written: 'length' },
  repetition: { kind: 'finished', written: 'length' },
  tool_calls: { kind: 'finished', written: 'stop' },
  function_call: { kind: 'finished', written: 'stop' },
  abort: { kind: 'aborted', resumable: true },
  error: { kind: 'aborted', resumable: true },
};

const UNKNOWN: FinishOutcome = { kind: 'aborted', resumable: false };

/**
 * The `server_finish_reason` of a rollout never generated because the server refused its prompt
 * as longer than its context with the max_tokens asked (a 400, executor/client.ts): aborted,
 * not resumed. Not a reason a server sends; counted in `finish_reasons` like one.
 */
export const CONTEXT_LENGTH = 'context_length';

/** The outcome of a server finish_reason (see the module comment for the table). */
export function finishOutcome(reason: string): FinishOutcome {
  return Object.hasOwn(OUTCOMES, reason) ? OUTCOMES[reason]! : UNKNOWN;
}

/** True for the reasons written as they are (no `server_finish_reason` needed, not counted). */
export function isPlainFinish(reason: string): boolean {
  return reason === 'stop' || reason === 'length';
}

/** How the summary line describes a counted reason: "repetition 2 (graded as length)". */
export function describeFinishCounts(counts: Readonly<Record<string, number>>): string {
  return Object.entries(counts)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([reason, n]) => {
      const o = finishOutcome(reason);
      const how = reason === CONTEXT_LENGTH
        ? 'refused by the server: prompt and max_tokens beyond its context; not generated'
        : o.kind === 'finished' ? `graded as ${o.written}` : o.resumable ? 'aborted, resumable' : 'unknown: not graded';
      return `${reason} ${n} (${how})`;
    })
    .join(', ');
}
