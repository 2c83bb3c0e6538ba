import { RolloutBudgetError, badOption } from '../errors.js';
import { createRegistry, type Registry } from '../registry.js';
import { authorization, refusedKey, unsendable } from './client.js';
import { backoff, type RetryPolicy } from './dispatcher.js';
import { generationDispatcher } from './dispatcher-http.js';
import { endpointUrl } from './endpoint.js';
import type { Api } from './types.js';

/**
 * How n, seeds, token counts and continuations are asked of one kind of server (`--server`).
 * Data only: the executor reads the fields, never branches on the name.
 *
 * - `vllm`: n choices per request (up to `--request-n`) with `seed`; vLLM seeds choice i with
 *   seed + i (vllm/v1/engine/parallel_sampling.py, `ParentRequest._get_child_sampling_params`),
 *   so rollout j keeps seed + j however a group is split. `return_token_ids: true` (vLLM ≥
 *   0.10.2) gives each choice its token ids, streamed or not.
 * - `sglang`: one rollout per request, with its own seed (group seed + j). SGLang passes a
 *   request's `seed` as `sampling_seed` to all n samples alike
 *   (sglang/srt/entrypoints/openai/serving_completions.py `_build_sampling_params`), honours seeds
 *   only with `--enable-deterministic-inference` (docs: advanced_features/deterministic_inference),
 *   and its chat streams carry no per-choice token ids: with one choice, the usage chunk counts it.
 *   `return_token_ids` is sent on /v1/completions, where SGLang streams token ids.
 * - `openai`: any other OpenAI-compatible server: one rollout per request with seed + j, only
 *   fields of the OpenAI API (no vendor extensions), tokens from the usage chunk. Chat partials
 *   are not kept (continuing a message needs vLLM/SGLang's `continue_final_message`).
 */
export interface ServerProfile {
  readonly name: string;
  /** One rollout per request (n = 1, seed + j each) instead of n choices seeded seed + i. */
  readonly oneRolloutPerRequest: boolean;
  /** Fields added to every request body, per API. */
  readonly fields: Readonly<Record<Api, Readonly<Record<string, unknown>>>>;
  /** Whether an aborted chat rollout can be continued (continue_final_message). */
  readonly continuesChat: boolean;
}

export const SERVER_PROFILES: Readonly<Record<'vllm' | 'sglang' | 'openai', ServerProfile>> = {
  vllm: { name: 'vllm', oneRolloutPerRequest: false, fields: { completions: { return_token_ids: true }, chat: { return_token_ids: true } }, continuesChat: true },
  sglang: { name: 'sglang', oneRolloutPerRequest: true, fields: { completions: { return_token_ids: true }, chat: {} }, continuesChat: true },
  openai: { name: 'openai', oneRolloutPerRequest: true, fields: { completions: {}, chat: {} }, continuesChat: false },
};

export function createServerRegistry(): Registry<ServerProfile> {
  return createRegistry<ServerProfile>('server profile', { ...SERVER_PROFILES });
}

/** Choices per request for a profile under `--request-n`. */
export function choicesPerRequest(profile: ServerProfile, requestN: number): number {
  return profile.oneRolloutPerRequest ? 1 : requestN;
}

/** What `/v1/models` said about one endpoint. */
export interface Detection {
  readonly endpoint: string;
  /** The profile its `owned_by` names ("vllm", "sglang"), else null. */
  readonly profile: string | null;
  readonly ownedBy: string | null;
  readonly models: readonly string[];
}

/**
 * Asks each endpoint's `GET /v1/models` who serves it: `owned_by` is "vllm" for vLLM
 * (vllm/entrypoints/openai/engine/protocol.py `ModelCard`) and "sglang" for SGLang
 * (sglang/srt/entrypoints/openai/protocol.py `ModelCard`). Connection errors and 5xx are retried
 * under `retry` (a server still starting); a 401 or 403 (a server that wants an API key, or
 * another one) is an error saying so, as every request would get it; another 4xx or an answer
 * without `owned_by` gives null. `apiKey` is sent as `Authorization: Bearer`.
 */
export async function detectServer(endpoint: string, retry: RetryPolicy, timeoutMs: number, apiKey?: string, stop?: AbortSignal): Promise<Detection> {
  const url = endpointUrl(endpoint, '/v1/models');
  const halted = () => stop?.aborted === true; // read anew after each wait
  let last = '';
  for (let attempt = 0; attempt <= retry.retries; attempt++) {
    if (attempt > 0) await pause(backoff(retry, attempt), stop);
    if (halted()) throw new StoppedDetection(url);
    let response: Response;
    try {
      const signal = stop === undefined ? AbortSignal.timeout(timeoutMs) : AbortSignal.any([AbortSignal.timeout(timeoutMs), stop]);
      response = await fetch(url, { signal, headers: authorization(apiKey), dispatcher: generationDispatcher() } as RequestInit);
    } catch (error) {
      if (halted()) throw new StoppedDetection(url);
      const code = (error as { cause?: { code?: unknown } }).cause?.code;
      last = String(code ?? (error as Error).message);
      if (code === 'ENOTFOUND') throw badOption(`--endpoint ${endpoint}: host not found (ENOTFOUND)`);
      const why = unsendable(error, url);
      if (why !== undefined) throw badOption(`--endpoint ${endpoint}: cannot send to ${url}: ${why}`);
      continue;
    }
    if (response.status >= 500 || response.status === 429) {
      last = `HTTP ${response.status}`;
      continue;
    }
    if (response.status === 401 || response.status === 403) {
      throw new RolloutBudgetError('BAD_OPTION', refusedKey(response.status, url, await response.text().catch(() => ''), apiKey));
    }
    if (!response.ok) return { endpoint, profile: null, ownedBy: null, models: [] };
    const body = (await response.json().catch(() => null)) as { data?: unknown } | null;
    const data = Array.isArray(body?.data) ? (body!.data as { id?: unknown; owned_by?: unknown }[]) : [];
    const owners = [...new Set(data.map((m) => m?.owned_by).filter((o): o is string => typeof o === 'string'))];
    const ownedBy = owners.length === 1 ? owners[0]! : null;
    const profile = ownedBy === 'vllm' || ownedBy === 'sglang' ? ownedBy : null;
    return { endpoint, profile, ownedBy, models: data.map((m) => m?.id).filter((id): id is string => typeof id === 'string') };
  }
  throw new UnreachableServer(url, last);
}

/** Waits `ms`, or until `stop` aborts. */
function pause(ms: number, stop?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      stop?.removeEventListener('abort', done);
      resolve();
    }
    stop?.addEventListener('abort', done, { once: true });
  });
}

/** detectServer's error when its `stop` aborted (Ctrl-C, or another endpoint answered long enough ago). */
export class StoppedDetection extends RolloutBudgetError {
  constructor(url: string) {
    super('INTERRUPTED', `stopped while asking ${url} which server it is: nothing was generated`, 130);
  }
}

/**
 * How long the other endpoints get to answer /v1/models once one has: a replica that hangs
 * (stopped, or its port open and nothing behind it) is taken for unreachable after this, not
 * after its whole retries (about 2.5 min with the default --timeout-s).
 */
export const DETECT_GRACE_MS = 3000;

/** detectServer's error when an endpoint never answered: `why` is the last failure's code or status. */
class UnreachableServer extends RolloutBudgetError {
  constructor(url: string, readonly why: string) {
    super('IO_ERROR', `cannot reach ${url} to detect the server (${why}); start the server, or pass --server vllm|sglang|openai`, 1);
  }
}

/**
 * The profile for `--server <spec>`: a registered name as given, or with "auto" the one every
 * endpoint's `/v1/models` names. Endpoints of different kinds are refused (one run speaks one
 * dialect); a server that names neither vLLM nor SGLang gets `openai`, with a note saying so;
 * an endpoint that cannot be reached while others answer is a note too. `notes`: what to tell
 * the user; `note`: the first of them (null: none).
 */
export async function resolveServer(
  spec: string,
  endpoints: readonly string[],
  retry: RetryPolicy,
  timeoutMs: number,
  registry: Registry<ServerProfile> = createServerRegistry(),
  apiKey?: string,
  stop?: AbortSignal,
): Promise<{ profile: ServerProfile; note: string | null; notes: string[]; unreachable: number[] }> {
  if (spec !== 'auto') return { profile: registry.get(spec), note: null, notes: [], unreachable: [] };
  // An endpoint that cannot be reached (a replica down) is taken for the same server as those
  // that answer, and said so (`unreachable`: their indices, which execute starts resting:
  // EndpointRests). Only when none answers, or on any other error (a refused key, a URL that
  // cannot be sent), is it an error. Once one has answered, the others get DETECT_GRACE_MS.
  // `stop` (Ctrl-C) ends every question at once.
  const late = new AbortController();
  const asking = stop === undefined ? late.signal : AbortSignal.any([late.signal, stop]);
  let graceTimer: NodeJS.Timeout | undefined;
  const settled = await Promise.allSettled(endpoints.map((e) => detectServer(e, retry, timeoutMs, apiKey, asking).then((d) => {
    graceTimer ??= setTimeout(() => late.abort(), DETECT_GRACE_MS);
    return d;
  }))).finally(() => clearTimeout(graceTimer));
  if (stop?.aborted === true) throw settled.map((s) => (s.status === 'rejected' ? s.reason : undefined)).find((r) => r instanceof StoppedDetection) ?? new StoppedDetection(endpointUrl(endpoints[0]!, '/v1/models'));
  const found: Detection[] = [];
  const notes: string[] = [];
  const unreachable: number[] = [];
  for (const [i, s] of settled.entries()) {
    if (s.status === 'fulfilled') found.push(s.value);
    else if (s.reason instanceof UnreachableServer || s.reason instanceof StoppedDetection) {
      unreachable.push(i);
      const why = s.reason instanceof UnreachableServer ? s.reason.why : `no answer ${DETECT_GRACE_MS / 1000} s after another endpoint's`;
      notes.push(`${endpoints[i]} did not answer /v1/models (${why}): taking it for the same server as the others; its requests go to them while it does not answer`);
    } else throw s.reason;
  }
  if (found.length === 0) throw (settled[0] as PromiseRejectedResult).reason;
  const kinds = [...new Set(found.map((d) => d.profile ?? 'openai'))];
  if (kinds.length > 1) {
    throw new RolloutBudgetError('BAD_OPTION', `the endpoints are different servers (${found.map((d) => `${d.endpoint}: ${d.profile ?? d.ownedBy ?? 'unknown'}`).join(', ')}); run one command per kind, or pass --server`);
  }
  const first = found[0]!;
  if (first.profile === null) {
    notes.unshift(`${first.endpoint}/v1/models does not name vLLM or SGLang (owned_by ${first.ownedBy === null ? 'absent' : JSON.stringify(first.ownedBy)}): using --server openai (one rollout per request, standard fields only); pass --server vllm|sglang to choose`);
  }
  return { profile: registry.get(first.profile ?? 'openai'), note: notes[0] ?? null, notes, unreachable };
}
