import { describeFinishCounts } from './finish.js';
import type { Unit } from './requests.js';
import type { ExecuteSummary } from './types.js';

/** The q-quantile (0..1) of sorted values by the nearest-rank method; null when empty. O(1). */
export function quantile(sorted: readonly number[], q: number): number | null {
  if (sorted.length === 0) return null;
  const rank = Math.max(1, Math.ceil(q * sorted.length));
  return sorted[rank - 1]!;
}

export function summarize(
  units: readonly Unit[],
  rewards: readonly number[],
  planned: number,
  wallMs: number,
  counters: { requests: number; retries: number; perEndpoint: number[]; failuresPerEndpoint: number[]; stepTokens: number; stoppedByBudget: boolean; finishReasons: Record<string, number> },
): ExecuteSummary {
  const done = units.filter((u) => u.state === 'done');
  const latencies = done.filter((u) => u.latencyMs !== null && !(u.resumed && u.startedAt === 0)).map((u) => u.latencyMs!).sort((a, b) => a - b);
  const wall = wallMs / 1000;
  return {
    rollouts: done.length,
    planned,
    aborted: units.filter((u) => u.state === 'aborted').length,
    not_launched: units.filter((u) => u.state === 'not-launched').length,
    resumed: done.filter((u) => u.resumed).length,
    tokens: counters.stepTokens,
    tokens_unknown: units.filter((u) => (u.state === 'done' || u.state === 'aborted') && u.tokens === null).length,
    wall_s: round(wall, 3),
    tokens_per_s: wall > 0 ? round(counters.stepTokens / wall, 1) : 0,
    latency_p50_ms: quantile(latencies, 0.5),
    latency_p99_ms: quantile(latencies, 0.99),
    requests: counters.requests,
    retries: counters.retries,
    mean_reward: rewards.length === 0 ? null : round(rewards.reduce((s, r) => s + r, 0) / rewards.length, 4),
    requests_per_endpoint: [...counters.perEndpoint],
    failures_per_endpoint: [...counters.failuresPerEndpoint],
    stopped_by_token_budget: counters.stoppedByBudget,
    finish_reasons: { ...counters.finishReasons },
  };
}

function round(x: number, digits: number): number {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}

/**
 * The summary of a step run in rounds: counts, tokens and wall time summed; mean reward
 * weighted by rollouts; latency quantiles the worst round's (a bound, not a pooled quantile).
 */
export function mergeSummaries(list: readonly ExecuteSummary[], rewards?: readonly number[]): ExecuteSummary {
  if (list.length === 1) return list[0]!;
  const sum = (f: (s: ExecuteSummary) => number) => list.reduce((a, s) => a + f(s), 0);
  const worst = (f: (s: ExecuteSummary) => number | null) => {
    const xs = list.map(f).filter((x): x is number => x !== null);
    return xs.length === 0 ? null : Math.max(...xs);
  };
  const rollouts = sum((s) => s.rollouts);
  const tokens = sum((s) => s.tokens);
  const wall = sum((s) => s.wall_s);
  const rewarded = list.filter((s) => s.mean_reward !== null);
  const rewardRollouts = rewarded.reduce((a, s) => a + s.rollouts, 0);
  return {
    rollouts,
    planned: sum((s) => s.planned),
    aborted: sum((s) => s.aborted),
    not_launched: sum((s) => s.not_launched),
    resumed: sum((s) => s.resumed),
    tokens,
    tokens_unknown: sum((s) => s.tokens_unknown),
    wall_s: round(wall, 3),
    tokens_per_s: wall > 0 ? round(tokens / wall, 1) : 0,
    latency_p50_ms: worst((s) => s.latency_p50_ms),
    latency_p99_ms: worst((s) => s.latency_p99_ms),
    requests: sum((s) => s.requests),
    retries: sum((s) => s.retries),
    // From the rewards themselves when given: the rounds' means are rounded (65 of 120 read 0.5416).
    mean_reward: rewards !== undefined
      ? (rewards.length === 0 ? null : round(rewards.reduce((a, r) => a + r, 0) / rewards.length, 4))
      : rewardRollouts === 0 ? null : round(rewarded.reduce((a, s) => a + s.mean_reward! * s.rollouts, 0) / rewardRollouts, 4),
    requests_per_endpoint: list[0]!.requests_per_endpoint.map((_, e) => sum((s) => s.requests_per_endpoint[e] ?? 0)),
    failures_per_endpoint: list[0]!.failures_per_endpoint.map((_, e) => sum((s) => s.failures_per_endpoint[e] ?? 0)),
    stopped_by_token_budget: list.some((s) => s.stopped_by_token_budget),
    finish_reasons: mergeCounts(list.map((s) => s.finish_reasons)),
  };
}

/** Sums count maps key by key. */
export function mergeCounts(list: readonly Readonly<Record<string, number>>[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const counts of list) for (const [k, n] of Object.entries(counts)) out[k] = (out[k] ?? 0) + n;
  return out;
}

/** The one-line summary `execute` prints on stderr. */
export function summaryLine(s: ExecuteSummary): string {
  const ms = (x: number | null) => (x === null ? '-' : `${x} ms`);
  return (
    `rollouts ${s.rollouts}/${s.planned} (aborted ${s.aborted}, resumed ${s.resumed}, not launched ${s.not_launched}), ` +
    `tokens ${s.tokens}${s.tokens_unknown > 0 ? ` (+${s.tokens_unknown} rollouts unreported)` : ''}, wall ${s.wall_s} s, ` +
    `${s.tokens_per_s} tokens/s, latency p50 ${ms(s.latency_p50_ms)} p99 ${ms(s.latency_p99_ms)}, ` +
    `requests ${s.requests} (retries ${s.retries}), mean reward ${s.mean_reward ?? '-'}` +
    `${s.failures_per_endpoint.some((n) => n > 0) ? `; failed requests by endpoint: ${s.failures_per_endpoint.join(', ')}` : ''}` +
    `${s.stopped_by_token_budget ? ', stopped: token budget spent' : ''}` +
    `${Object.keys(s.finish_reasons).length > 0 ? `; server finish reasons: ${describeFinishCounts(s.finish_reasons)}` : ''}`
  );
}

/** A progress bar for a terminal: redraws one line on stderr, at most every 100 ms. */
export function progressBar(write: (text: string) => void, now: () => number = Date.now): (done: number, total: number) => void {
  let last = -Infinity;
  return (done, total) => {
    const t = now();
    if (done < total && t - last < 100) return;
    last = t;
    const width = 30;
    const filled = total > 0 ? Math.round((done / total) * width) : width;
    write(`\r[${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${done}/${total} rollouts${done >= total ? '\n' : ''}`);
  };
}

/**
 * The warning for prompts a server refused as longer than its context (executor/execute.ts),
 * naming the first three with the server's message; undefined when there are none.
 */
export function tooLongWarning(list: readonly { prompt_id: string; message: string }[]): string | undefined {
  if (list.length === 0) return undefined;
  const named = list.slice(0, 3).map((p) => `${JSON.stringify(p.prompt_id)} (${p.message.replace(/\.$/, '')})`).join('; ');
  const more = list.length > 3 ? `; and ${list.length - 3} more` : '';
  return `${list.length} prompt${list.length === 1 ? '' : 's'} longer than the server's context with their max_tokens, not generated: ${named}${more}. ` +
    'Their rollouts are written as aborted (server_finish_reason "context_length"), which observe skips; lower their max_tokens, raise the server\'s context length, or drop them';
}
