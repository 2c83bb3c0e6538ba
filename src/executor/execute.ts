import { RolloutBudgetError, badInput, quote } from '../errors.js';
import { groupId, groupSeed } from '../plan/exports.js';
import type { Candidate, Plan } from '../plan/types.js';
import { promptMetaFields } from '../store/meta.js';
import { RequestError, streamRequest } from './client.js';
import { Dispatcher, backoff } from './dispatcher.js';
import { endpointUrl, normalizeEndpoint } from './endpoint.js';
import { checkExecuteNumbers } from './check-options.js';
import { CONTEXT_LENGTH, finishOutcome, isPlainFinish } from './finish.js';
import type { PartialRollout, PartialSource } from './partials.js';
import { SERVER_PROFILES, choicesPerRequest } from './profiles.js';
import { apiFor, checkExtraBody, freshUnit, promptText, requestBody, seedRuns, type Unit } from './requests.js';
import { summarize } from './summary.js';
import type { Api, ExecuteOptions, ExecuteReport, ExecutedRollout } from './types.js';
import { withReport } from './types.js';

interface Group {
  readonly prompt: Candidate;
  readonly api: Api;
  readonly target: number;
  /** Index of the first new rollout (the allocation's first_rollout, else 0). */
  readonly first: number;
  readonly maxTokens: number | null;
  readonly units: Unit[];
  done: number;
  full: boolean;
  /** Requests in flight and their rollouts. */
  readonly inflight: Map<AbortController, readonly Unit[]>;
}

/** What checkExecuteInputs needs of the execute options: no server, endpoint or store. */
export type InputCheckOptions = Pick<ExecuteOptions, 'verifier' | 'api' | 'promptField' | 'defaultMaxTokens' | 'origin'>;

/**
 * Checks a plan against its prompts as executePlan does first, before any request: every
 * planned prompt is in the prompts, and each suits the verifier and the API. Throws BAD_INPUT
 * naming the allocation or the prompt; the CLI calls it before it asks a server who it is or
 * opens the state, so bad input is named first and writes nothing.
 */
export function checkExecuteInputs(plan: Plan, prompts: ReadonlyMap<string, Candidate>, options: InputCheckOptions): void {
  groupsOf(plan, prompts, options);
}

/** The plan's groups with n > 0, each checked (checkExecuteInputs). */
function groupsOf(plan: Plan, prompts: ReadonlyMap<string, Candidate>, options: InputCheckOptions): Group[] {
  const origin = options.origin ?? {};
  const groups: Group[] = [];
  plan.allocations.forEach((a, i) => {
    if (a.n <= 0) return;
    const prompt = prompts.get(a.prompt_id);
    if (prompt === undefined) {
      throw badInput(`${origin.plan ?? 'plan'}: allocations[${i}]`, `"prompt_id" ${quote(a.prompt_id)} is not in ${origin.prompts ?? 'the prompts'}`);
    }
    const where = `${origin.promptLines?.get(a.prompt_id) ?? origin.prompts ?? 'prompts'}: prompt ${quote(a.prompt_id)}`;
    options.verifier.check(prompt, where);
    groups.push({
      prompt, api: apiFor(prompt, options.api, where, options.promptField), target: a.n, first: a.first_rollout ?? 0,
      maxTokens: a.max_tokens ?? options.defaultMaxTokens ?? null, units: [], done: 0, full: false, inflight: new Map(),
    });
  });
  return groups;
}

/** The route of an API's requests. */
const pathOf = (api: Api) => (api === 'chat' ? '/v1/chat/completions' : '/v1/completions');

/**
 * Runs a plan against OpenAI-compatible servers: per group, resumes stored partials first, then
 * launches fresh rollouts (⌊(1 + r)·n⌋ in all with over-provisioning r), dispatches requests of
 * at most `requestN` choices to the least-loaded endpoint under a concurrency bound (an endpoint
 * that failed rests while others answer: Dispatcher), retries 5xx / connection errors /
 * timeouts with exponential backoff (never 4xx), keeps the first n
 * finished rollouts of each group and aborts the rest, then grades the finished ones.
 * Every planned rollout appears once in the results (finished or "abort"); a rollout is never
 * written twice: units change state only queued → running → done | aborted.
 */
export async function executePlan(plan: Plan, prompts: ReadonlyMap<string, Candidate>, options: ExecuteOptions): Promise<ExecuteReport> {
  const now = options.now ?? Date.now;
  // In the library's terms (the CLI checks --endpoint itself, cli/executor.ts).
  if (options.endpoints.length === 0) throw new RolloutBudgetError('BAD_OPTION', 'endpoints is empty: give at least one OpenAI-compatible server URL', 2, ['endpoints']);
  if (options.extraBody !== undefined) checkExtraBody(options.extraBody, options.temperature);
  checkExecuteNumbers(options);
  const endpoints = options.endpoints.map(normalizeEndpoint);
  const server = options.server ?? SERVER_PROFILES.vllm;
  const groups = groupsOf(plan, prompts, options);
  const stored = options.partials?.forPrompts(groups.map((g) => g.prompt.id)) ?? new Map<string, PartialRollout[]>();
  const start = now();
  const planned = groups.reduce((s, g) => s + g.target, 0);
  let finished = 0;
  const counters = { requests: 0, retries: 0, perEndpoint: endpoints.map(() => 0), failuresPerEndpoint: endpoints.map(() => 0), stepTokens: 0, stoppedByBudget: false, finishReasons: {} as Record<string, number> };
  const tooLongPrompts: { prompt_id: string; message: string }[] = [];
  const perRequest = choicesPerRequest(server, options.requestN);
  const overProvisioning = options.overProvision > 0;
  const tokenBudget = overProvisioning ? (options.tokenBudget ?? plan.budget.tokens ?? null) : null;

  const markDone = (g: Group, u: Unit, finish: 'stop' | 'length', serverReason: string | null = null) => {
    u.state = 'done';
    u.finish = finish;
    u.serverReason = serverReason;
    u.latencyMs = u.resumed && u.startedAt === 0 ? 0 : now() - u.startedAt;
    g.done++;
    finished++;
    options.onProgress?.(finished, planned);
    if (g.done >= g.target) fill(g);
  };
  /**
   * Whether an aborted unit's text can be continued next step: it has text (a continuation of
   * nothing is a fresh rollout that would carry the aborted one's tokens), none of it was
   * reasoning the server sent apart (not kept), and the API continues it.
   */
  const continuable = (g: Group, u: Unit) => u.text.length > 0 && !u.reasoned && (g.api === 'completions' || server.continuesChat);
  /** The group has its n: abort what is in flight, drop what was never launched. */
  const fill = (g: Group) => {
    g.full = true;
    // Abort only requests with a rollout still generating (a finished one keeps its connection).
    for (const [c, run] of g.inflight) if (run.some((u) => u.state === 'running')) c.abort();
    for (const u of g.units) {
      if (u.state === 'running') {
        u.state = 'aborted';
        u.resumable = continuable(g, u);
      }
      else if (u.state === 'queued') u.state = 'not-launched';
    }
  };

  const runs: { group: Group; units: Unit[] }[] = [];
  for (const g of groups) {
    const launch = Math.floor(g.target * (1 + options.overProvision) + 1e-9);
    const partials = (stored.get(g.prompt.id) ?? []).slice(0, launch);
    for (const p of partials) {
      // A partial without text (stored before its tokens were known to be reasoning only) starts
      // again from nothing: its tokens are not carried, nor taken from max_tokens.
      const carried = p.text === '' ? 0 : p.tokens;
      const u: Unit = {
        rollout_id: p.rollout_id, prompt_id: p.prompt_id, seed: p.seed, baseText: p.text, baseTokens: carried, resumed: true,
        text: p.text, tokens: carried, newTokens: 0, state: 'queued', finish: null, serverReason: null, resumable: true, reasoned: false, startedAt: 0, latencyMs: null,
      };
      g.units.push(u);
    }
    const gid = groupId(plan.step, g.prompt.id);
    const seed = groupSeed(plan.seed, plan.step, g.prompt.id);
    // Fresh rollouts are numbered (and seeded) after the group's rollouts so far: an earlier
    // round launched at most ⌊(1 + r)·first_rollout⌋ fresh ones when it filled, any it aborted
    // is a stored partial of this same group, and a caller that saw them all says so.
    let next = Math.max(Math.floor(g.first * (1 + options.overProvision) + 1e-9), options.nextRollout?.get(g.prompt.id) ?? 0);
    for (const p of stored.get(g.prompt.id) ?? []) {
      if (p.rollout_id.startsWith(`${gid}#`)) next = Math.max(next, Number(p.rollout_id.slice(gid.length + 1)) + 1);
    }
    for (let j = 0; j < launch - partials.length; j++) g.units.push(freshUnit(gid, g.prompt.id, seed, next + j));
    // Complete partials (surplus of an earlier step) and partials already at max_tokens finish now.
    partials.forEach((p, i) => {
      const u = g.units[i]!;
      if (g.full) u.state = 'not-launched';
      else if (p.finish_reason !== null) markDone(g, u, p.finish_reason);
      else if (g.maxTokens !== null && p.tokens !== null && p.tokens >= g.maxTokens) markDone(g, u, 'length');
    });
    if (!g.full) for (const run of seedRuns(g.units.filter((u) => u.state === 'queued'), perRequest)) runs.push({ group: g, units: run });
  }

  const dispatcher = new Dispatcher(endpoints, options.concurrency, now, options.rests);
  let failure: Error | null = null;
  const stopAll = () => {
    for (const g of groups) if (!g.full) fill(g);
  };

  const attempt = async (g: Group, run: Unit[], endpoint: number): Promise<void> => {
    const controller = new AbortController();
    let timedOut = false;
    // An idle timeout: restarted by every piece of the answer (onActivity), so a long streamed
    // generation that keeps coming is never cut, and a server that sends nothing is.
    const timer = setTimeout(() => {
      timedOut = true;
      controller.abort();
    }, options.timeoutMs);
    const activity = () => void timer.refresh();
    g.inflight.set(controller, run);
    const t0 = now();
    for (const u of run) {
      u.state = 'running';
      u.startedAt = t0;
    }
    counters.requests++;
    counters.perEndpoint[endpoint]!++;
    const path = pathOf(g.api);
    const body = requestBody({
      prompt: g.prompt, api: g.api, model: options.model, run, maxTokens: g.maxTokens, server, promptField: options.promptField,
      ...(options.temperature === undefined ? {} : { temperature: options.temperature }), ...(options.extraBody === undefined ? {} : { extra: options.extraBody }),
    });
    const addTokens = (u: Unit, tokens: number) => {
      u.newTokens += tokens;
      counters.stepTokens += tokens;
      if (tokenBudget !== null && counters.stepTokens >= tokenBudget && !counters.stoppedByBudget) {
        counters.stoppedByBudget = true;
        stopAll();
      }
    };
    // A single-choice request counts its rollout from the usage object (the latest total wins:
    // SGLang's continuous usage sends one per chunk), over the token ids its chunks carried: vLLM
    // with a reasoning parser sends no chunk for a step whose only token is <think> or </think>
    // (vllm/reasoning/basic_parsers.py), which its usage counts.
    let fromUsage = false;
    try {
      await streamRequest(
        { url: endpointUrl(endpoints[endpoint]!, path), body, chat: g.api === 'chat', signal: controller.signal, onActivity: activity, ...(options.apiKey === undefined ? {} : { apiKey: options.apiKey }) },
        {
          delta(i, text, tokens) {
            const u = run[i];
            if (u === undefined || u.state !== 'running') return;
            u.text += text;
            if (tokens === null) {
              if (!fromUsage) u.tokens = null;
            } else if (!fromUsage) {
              if (u.tokens !== null) u.tokens += tokens;
              addTokens(u, tokens);
            }
          },
          finish(i, reason) {
            const u = run[i];
            if (u === undefined || u.state !== 'running') return;
            if (!isPlainFinish(reason)) counters.finishReasons[reason] = (counters.finishReasons[reason] ?? 0) + 1;
            const outcome = finishOutcome(reason);
            if (outcome.kind === 'finished') {
              markDone(g, u, outcome.written, isPlainFinish(reason) ? null : reason);
              return;
            }
            // Aborted by the server: not graded, not observed; a partial text may be resumed.
            u.state = 'aborted';
            u.serverReason = reason;
            u.resumable = outcome.resumable && continuable(g, u);
          },
          reasoning(i) {
            const u = run[i];
            if (u !== undefined) u.reasoned = true;
          },
          usage(completionTokens) {
            const u = run[0]!;
            if (run.length !== 1 || (u.resumed && u.baseTokens === null)) return;
            fromUsage = true;
            const extra = completionTokens - u.newTokens;
            u.tokens = (u.baseTokens ?? 0) + completionTokens;
            if (extra !== 0) addTokens(u, extra);
          },
        },
        () => timedOut,
      );
      if (run.some((u) => u.state === 'running')) throw new RequestError('stream ended without a finish_reason for every choice', 'retryable');
    } finally {
      clearTimeout(timer);
      g.inflight.delete(controller);
    }
  };

  /**
   * The server refused the group's prompt as longer than its context with this max_tokens: no
   * rollout of it can run. Its rollouts are written as aborted, `server_finish_reason`
   * "context_length", not resumed (as many as the plan gave it); the rest of the run goes on.
   */
  const tooLong = (g: Group, message: string) => {
    if (g.full) return;
    g.full = true;
    for (const [c] of g.inflight) c.abort();
    let written = g.units.filter((u) => u.state === 'done' || u.state === 'aborted').length;
    for (const u of g.units) {
      if (u.state !== 'running' && u.state !== 'queued') continue;
      if (written >= g.target) {
        if (u.state === 'queued') u.state = 'not-launched';
        continue;
      }
      u.state = 'aborted';
      u.serverReason = CONTEXT_LENGTH;
      u.resumable = false;
      written++;
      counters.finishReasons[CONTEXT_LENGTH] = (counters.finishReasons[CONTEXT_LENGTH] ?? 0) + 1;
    }
    tooLongPrompts.push({ prompt_id: g.prompt.id, message });
  };

  /** The request a run-ending error came from: its prompt, rollouts and URL (and the timeout it ran past). */
  const requestNamed = (g: Group, run: readonly Unit[], endpoint: number, e: RequestError) => {
    const rollouts = run.length === 1 ? `rollout ${run[0]!.rollout_id}` : `rollouts ${run[0]!.rollout_id}..${run.at(-1)!.rollout_id}`;
    const url = endpointUrl(endpoints[endpoint]!, pathOf(g.api));
    const timeout = e.message.startsWith('request timed out') ? `; nothing came for ${options.timeoutMs / 1000} s (--timeout-s)` : '';
    return `prompt ${quote(g.prompt.id)}, ${rollouts}${e.message.includes(url) ? '' : `, ${url}`}${timeout}`;
  };

  const runSpec = async (g: Group, run: Unit[], tries: number): Promise<void> => {
    if (failure !== null || g.full) return;
    const endpoint = await dispatcher.acquire();
    let retry: Unit[] | null = null;
    try {
      if (failure !== null || g.full) return;
      await attempt(g, run, endpoint);
      dispatcher.answered(endpoint);
    } catch (error) {
      const e = error instanceof RequestError ? error : new RequestError(String(error), 'fatal');
      if (e.kind === 'retryable') {
        dispatcher.failed(endpoint);
        counters.failuresPerEndpoint[endpoint]!++;
      }
      if (e.kind === 'cancelled' || g.full) return;
      if (e.kind === 'too-long') {
        tooLong(g, e.message);
        return;
      }
      if (e.kind === 'fatal' || tries >= options.retry.retries) {
        const detail = e.kind === 'fatal' ? e.message : `${e.message}; gave up after ${tries + 1} attempts`;
        if (failure === null) failure = new RolloutBudgetError(e.status !== undefined && e.status < 500 ? 'BAD_OPTION' : 'IO_ERROR', `generation failed: ${detail} (${requestNamed(g, run, endpoint, e)})`, e.kind === 'fatal' ? 2 : 1);
        stopAll();
        return;
      }
      retry = run.filter((u) => u.state === 'running');
      for (const u of retry) {
        u.state = 'queued';
        u.text = u.baseText;
        u.tokens = u.baseTokens;
        u.serverReason = null;
        counters.stepTokens -= u.newTokens;
        u.newTokens = 0;
      }
    } finally {
      dispatcher.release(endpoint);
    }
    if (retry === null || retry.length === 0) return;
    counters.retries++;
    await new Promise((resolve) => setTimeout(resolve, backoff(options.retry, tries + 1)));
    await Promise.all(seedRuns(retry, perRequest).map((r) => runSpec(g, r, tries + 1)));
  };

  // Ctrl-C (options.stop): every group as if it were full, before or during the run.
  const stop = options.stop;
  if (stop?.aborted === true) stopAll();
  else stop?.addEventListener('abort', stopAll, { once: true });
  try {
    await Promise.all(runs.map((r) => runSpec(r.group, r.units, 0)));
  } finally {
    stop?.removeEventListener('abort', stopAll);
  }
  // A failure ends the run as Ctrl-C does: what finished is graded, what was in flight is
  // aborted (kept to resume where its text allows), and the rejection carries them
  // (reportOfFailure) for the caller to write before it raises the error.
  const wallMs = now() - start;

  const doneUnits = groups.flatMap((g) => g.units.filter((u) => u.state === 'done').map((u) => ({ g, u })));
  const rewards = await verifyAfter(failure, () => options.verifier.verify(
    doneUnits.map(({ g, u }) => ({
      rollout_id: u.rollout_id, prompt_id: u.prompt_id, prompt: g.prompt, response: u.text, finish_reason: u.finish!,
      input: g.api === 'chat' && Array.isArray(g.prompt.messages) ? (g.prompt.messages as unknown[]) : (promptText(g.prompt, options.promptField) ?? null),
    })),
  ));
  const rewardOf = new Map(doneUnits.map(({ u }, i) => [u, rewards[i]!]));
  const results: ExecutedRollout[] = [];
  // Partials that were resumed are replaced by their outcome; those never launched stay stored.
  const consumed = groups.flatMap((g) => g.units.filter((u) => u.resumed && (u.state === 'done' || u.state === 'aborted')).map((u) => u.rollout_id));
  const keep: PartialRollout[] = [];
  for (const g of groups) {
    const group = promptMetaFields(g.prompt);
    for (const u of g.units) {
      if (u.state !== 'done' && u.state !== 'aborted') continue;
      const aborted = u.state === 'aborted';
      results.push({
        prompt_id: u.prompt_id, step: plan.step, rollout_id: u.rollout_id, reward: aborted ? 0 : rewardOf.get(u)!,
        ...(u.tokens === null ? {} : { tokens: u.tokens }),
        finish_reason: aborted ? 'abort' : u.finish!, ...(u.serverReason === null ? {} : { server_finish_reason: u.serverReason }), ...group, seed: u.seed,
        ...(u.latencyMs === null ? {} : { latency_ms: u.latencyMs }),
      });
      if (aborted && u.resumable) keep.push({ rollout_id: u.rollout_id, prompt_id: u.prompt_id, step: plan.step, seed: u.seed, text: u.text, tokens: u.tokens, finish_reason: null });
    }
  }
  const summary = summarize(groups.flatMap((g) => g.units), rewards, planned, wallMs, counters);
  const report = { results, summary, partials: { consumed, keep }, too_long: tooLongPrompts };
  if (failure !== null) throw withReport(failure, report);
  return report;
}

/**
 * Stores a run's partial rollouts (one transaction): call it after the results are safe, so a
 * failed write never loses a resumed rollout (at worst it is resumed again).
 */
export function commitPartials(store: PartialSource, report: ExecuteReport): void {
  store.replace(report.partials.consumed, report.partials.keep);
}

/**
 * Grades what finished; when the run already failed (`failure`) and grading fails too, the
 * run's failure is raised, the grader's error added to it (it hid the generation's).
 */
async function verifyAfter(failure: RolloutBudgetError | null, verify: () => Promise<number[]>): Promise<number[]> {
  try {
    return await verify();
  } catch (error) {
    if (failure === null) throw error;
    throw new RolloutBudgetError(failure.code, `${failure.message}; grading what finished before it failed too: ${error instanceof Error ? error.message : String(error)}`, failure.exitCode, failure.fields);
  }
}
