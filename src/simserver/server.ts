/**
 * TEST DOUBLE — a simulated OpenAI-compatible inference server on 127.0.0.1, standing in for
 * vLLM / SGLang where no GPU server can run (tests, dry runs of `execute` and `loop`). Real
 * HTTP (node:http): POST /v1/completions and /v1/chat/completions with n, max_tokens, seed,
 * stream or not, per-choice finish_reason, token_ids when `return_token_ids` is true, a usage
 * chunk when `stream_options.include_usage` is true; continuation of a partial response
 * (completions: the prompt plus the partial text; chat: a final assistant message with
 * `continue_final_message`). GET /v1/models names the server in `owned_by`, as vLLM and SGLang do.
 *
 * Profiles (`profile`), each behaving as its server does on the points the executor relies on:
 * - `vllm` (default): choice i of a request uses seed + i (vllm/v1/engine/parallel_sampling.py);
 *   token ids per choice, streamed or not; `owned_by: "vllm"`.
 * - `sglang`: every choice of a request uses the request's one seed (SGLang's `sampling_seed`,
 *   serving_completions.py), so n > 1 draws the same sample n times; token ids only on
 *   /v1/completions, none in chat answers; `owned_by: "sglang"`; native POST /generate
 *   (sglang.ts) with its equal-n rule and `max_new_tokens` default 128.
 * - `openai`: a strict OpenAI-API server: vendor fields (`return_token_ids`,
 *   `continue_final_message`, `add_generation_prompt`) are a 400 "Unrecognized request argument";
 *   no token ids; `owned_by: "system"`.
 * Responses come from SimModel (model.ts). Faults for tests: latency before the first byte, 5xx
 * errors, connections dropped mid-stream, hung requests, choices ended with a given
 * finish_reason (abort, error, repetition, ...), answers as one JSON body although `stream` was
 * asked (a proxy), an engine that fails mid-answer (vLLM's in-stream error chunk, stream.ts
 * ENGINE_ERROR_CHUNK), and SSE variants (stream.ts). With `reasoning`, chat answers carry their
 * thinking apart, as with a reasoning parser. With `maxModelLen`, a prompt too long for the
 * context with its max_tokens is the 400 its server gives (contextError); with `apiKey`, a request
 * without that key is the 401 its server gives. GET /stats returns what reached the server.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import seedrandom from 'seedrandom';
import { SimModel, countSimTokens, tokenId, tooManyChoices, SIM_ANSWER_TOKENS, SIM_MAX_N, type SimPrompt } from './model.js';
import { answerGenerate } from './sglang.js';
import { chatDelta, plainSse, streamChoices, type SimChoice, type SimReasoningField, type SimSse } from './stream.js';

export const SIM_PROFILES = ['vllm', 'sglang', 'openai'] as const;
export type SimProfile = (typeof SIM_PROFILES)[number];

/** A choice ended by the server with `reason` after `atToken` tokens (default: half its length). */
export interface SimFinishFault {
  /** 1-based arrival number of the request. */
  readonly request: number;
  /** Choice index; undefined: every choice of the request. */
  readonly choice?: number;
  readonly reason: string;
  readonly atToken?: number;
}

export interface SimFaults {
  /** Delay before the first byte of every response, ms. */
  readonly latencyMs: number;
  /** Probability that a request gets a 503 (drawn per arrival from the server seed). */
  readonly errorRate: number;
  /** Probability that a streaming request's connection is dropped after its first chunk. */
  readonly dropRate: number;
  /** 1-based arrival numbers that get a 503 / are dropped mid-stream / hang (never answered). */
  readonly errorRequests: readonly number[];
  readonly dropRequests: readonly number[];
  readonly hangRequests: readonly number[];
  /** Choices the server ends early with a finish_reason of its own. */
  readonly finishes: readonly SimFinishFault[];
  /** Answer one JSON body even when `stream: true` was asked (a proxy that buffers). */
  readonly ignoreStream: boolean;
  /**
   * Probability that a streamed answer's engine fails after each choice's first chunk: vLLM
   * 0.10–0.11's error chunk with code 400, then `[DONE]` (stream.ts ENGINE_ERROR_CHUNK). Drawn
   * only when above 0, so a seed's other faults fall as before.
   */
  readonly streamErrorRate: number;
  /** 1-based arrival numbers whose streamed answer gets that error chunk. */
  readonly streamErrorRequests: readonly number[];
}

export const noFaults: SimFaults = { latencyMs: 0, errorRate: 0, dropRate: 0, errorRequests: [], dropRequests: [], hangRequests: [], finishes: [], ignoreStream: false, streamErrorRate: 0, streamErrorRequests: [] };

export interface SimServerOptions {
  readonly port?: number;
  readonly model?: SimModel;
  readonly prompts?: readonly SimPrompt[];
  /** Served model name; requests naming another get 404 (as vLLM). Undefined: any name. */
  readonly modelName?: string;
  /** Generation time per token and choice, ms (0: instant). */
  readonly msPerToken?: number;
  readonly faults?: Partial<SimFaults>;
  readonly seed?: number;
  /** Which server to behave as (see the module comment); default vllm. */
  readonly profile?: SimProfile;
  /** SSE formatting variants of streamed answers. */
  readonly sse?: Partial<SimSse>;
  /**
   * The context length (vLLM's --max-model-len, SGLang's --context-length): a request whose
   * prompt tokens and max_tokens do not fit is a 400 with the profile's message (contextError).
   * Undefined: no limit.
   */
  readonly maxModelLen?: number;
  /**
   * As a server started with `--api-key`: a request without `Authorization: Bearer <key>` gets
   * 401 `{"error": "Unauthorized"}`, as vLLM answers on every /v1 route (AuthenticationMiddleware,
   * vllm/entrypoints/openai/api_server.py) and SGLang on every route but /health and /metrics
   * (add_api_key_middleware, sglang/srt/utils.py), so /generate too. GET /health and /stats stay open.
   */
  readonly apiKey?: string;
  /**
   * As a server started with a reasoning parser (vLLM's and SGLang's `--reasoning-parser`): a
   * chat answer's thinking (every token before its closing sentence, SIM_ANSWER_TOKENS) comes in
   * this field, streamed or in `message`, and only the closing sentence in `content` (none when
   * max_tokens cut the thinking). No think-marker tokens are simulated. /v1/completions is
   * unchanged, as with those parsers. Undefined: everything is content.
   */
  readonly reasoning?: SimReasoningField;
}

/** What reached the server. */
export interface SimStats {
  requests: number;
  errors: number;
  drops: number;
  hangs: number;
  /** Streamed answers ended by the injected engine failure (SimFaults.streamErrorRate). */
  engineErrors: number;
  /** Choices started, per prompt id ("?" for unknown prompts); continuations included. */
  choicesByPrompt: Record<string, number>;
  /** Continuation choices (resumed partial rollouts), per prompt id. */
  continuationsByPrompt: Record<string, number>;
  /** Choices that ran to their finish_reason and were sent. */
  completedChoices: number;
  /** Choices cut because the client went away. */
  cancelledChoices: number;
  /** Requests per path ("/v1/completions", "/generate", ...). */
  byPath: Record<string, number>;
  /** Every request's n, seed and max tokens, in arrival order (OpenAI routes). */
  sampling: { n: number; seed: number; maxTokens: number }[];
}

export class SimServer {
  readonly stats: SimStats = { requests: 0, errors: 0, drops: 0, hangs: 0, engineErrors: 0, choicesByPrompt: {}, continuationsByPrompt: {}, completedChoices: 0, cancelledChoices: 0, byPath: {}, sampling: [] };
  private readonly server: Server;
  private readonly model: SimModel;
  private readonly byText = new Map<string, SimPrompt>();
  private readonly faults: SimFaults;
  private readonly msPerToken: number;
  private readonly random: () => number;
  private readonly hung = new Set<ServerResponse>();
  private readonly profile: SimProfile;
  private readonly sse: SimSse;

  constructor(private readonly options: SimServerOptions = {}) {
    this.model = options.model ?? new SimModel();
    for (const p of options.prompts ?? []) this.byText.set(p.text, p);
    this.faults = { ...noFaults, ...options.faults };
    this.msPerToken = options.msPerToken ?? 0;
    this.random = seedrandom(`faults/${options.seed ?? 0}`);
    this.profile = options.profile ?? 'vllm';
    this.sse = { ...plainSse, ...options.sse };
    this.server = createServer((req, res) => void this.handle(req, res));
  }

  /** Listens on 127.0.0.1 (port 0: any free port) and resolves to the base URL. */
  async start(): Promise<string> {
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(this.options.port ?? 0, '127.0.0.1', () => resolve());
    });
    return this.url;
  }

  get url(): string {
    const { port } = this.server.address() as AddressInfo;
    return `http://127.0.0.1:${port}`;
  }

  async close(): Promise<void> {
    for (const res of this.hung) res.destroy();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (req.method === 'GET' && req.url === '/stats') return json(res, 200, this.stats);
    if (this.options.apiKey !== undefined && (req.url?.startsWith('/v1/') || req.url === '/generate') && req.headers.authorization !== `Bearer ${this.options.apiKey}`) {
      return json(res, 401, { error: 'Unauthorized' });
    }
    if (req.method === 'GET' && (req.url === '/health' || req.url === '/v1/models')) {
      const ownedBy = this.profile === 'openai' ? 'system' : this.profile;
      return json(res, 200, { object: 'list', data: [{ id: this.options.modelName ?? 'sim', object: 'model', owned_by: ownedBy }] });
    }
    const chat = req.url === '/v1/chat/completions';
    const native = req.url === '/generate' && this.profile === 'sglang';
    if (req.method !== 'POST' || (!chat && !native && req.url !== '/v1/completions')) return json(res, 404, error(`no route ${req.method} ${req.url}`));
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const arrival = ++this.stats.requests;
    this.stats.byPath[req.url!] = (this.stats.byPath[req.url!] ?? 0) + 1;
    let body: Record<string, unknown>;
    try {
      body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>;
    } catch {
      return json(res, 400, error('body is not JSON'));
    }
    if (this.faults.hangRequests.includes(arrival)) {
      this.stats.hangs++;
      this.hung.add(res);
      res.on('close', () => this.hung.delete(res));
      return;
    }
    const draw = this.random();
    const drop = this.faults.dropRequests.includes(arrival) || this.random() < this.faults.dropRate;
    if (this.faults.latencyMs > 0) await sleep(this.faults.latencyMs);
    if (this.faults.errorRequests.includes(arrival) || draw < this.faults.errorRate) {
      this.stats.errors++;
      return json(res, 503, error('injected 503 (sim-server fault)'));
    }
    if (native) {
      const answer = answerGenerate(body, (text, seed, max) => this.choice(text, '', seed ?? Math.floor(this.random() * 2 ** 30), max));
      return json(res, answer.status, answer.body);
    }
    const parsed = this.parse(body, chat);
    if (typeof parsed === 'string') return json(res, 400, error(parsed));
    if (this.options.modelName !== undefined && body.model !== this.options.modelName) {
      return json(res, 404, error(`The model \`${String(body.model)}\` does not exist.`));
    }
    const { key, prefix, n, maxTokens, seed } = parsed;
    const limit = this.options.maxModelLen;
    const tooLong = limit === undefined ? undefined : contextError(this.profile, limit, promptTokens(body, chat), maxTokens);
    if (tooLong !== undefined) return json(res, 400, tooLong);
    this.stats.sampling.push({ n, seed, maxTokens });
    const id = this.byText.get(key)?.id ?? '?';
    const choices: SimChoice[] = [];
    for (let i = 0; i < n; i++) {
      // vLLM seeds choice i with seed + i; SGLang gives all n choices the request's one seed.
      const c = this.choice(key, prefix, this.profile === 'vllm' ? seed + i : seed, maxTokens);
      const fault = this.faults.finishes.find((f) => f.request === arrival && (f.choice === undefined || f.choice === i));
      if (fault === undefined) choices.push({ ...c, sent: 0 });
      else choices.push({ tokens: c.tokens.slice(0, fault.atToken ?? Math.floor(c.tokens.length / 2)), finish: fault.reason, sent: 0, thinking: c.thinking });
    }
    this.stats.choicesByPrompt[id] = (this.stats.choicesByPrompt[id] ?? 0) + n;
    if (prefix.length > 0) this.stats.continuationsByPrompt[id] = (this.stats.continuationsByPrompt[id] ?? 0) + n;
    const model = String(body.model);
    // Per-choice token ids: vLLM on both APIs; SGLang on /v1/completions only; never a strict OpenAI server.
    const ids = body.return_token_ids === true && (this.profile === 'vllm' || (this.profile === 'sglang' && !chat));
    const usage = (body.stream_options as { include_usage?: unknown } | undefined)?.include_usage === true;
    const reasoning = chat ? this.options.reasoning : undefined;
    if (body.stream === true && !this.faults.ignoreStream) {
      const engineError = this.faults.streamErrorRequests.includes(arrival) || (this.faults.streamErrorRate > 0 && this.random() < this.faults.streamErrorRate);
      return streamChoices(res, choices, { chat, model, ids, usage, drop, msPerToken: this.msPerToken, sse: this.sse, reasoning, engineError }, {
        onComplete: () => void this.stats.completedChoices++,
        onDrop: () => void this.stats.drops++,
        onClose: (open) => void (this.stats.cancelledChoices += open),
        onEngineError: () => void this.stats.engineErrors++,
      });
    }
    const longest = Math.max(...choices.map((c) => c.tokens.length));
    await sleep(longest * this.msPerToken);
    if (res.destroyed) return;
    this.stats.completedChoices += n;
    json(res, 200, {
      id: `sim-${arrival}`,
      object: chat ? 'chat.completion' : 'text_completion',
      model,
      choices: choices.map((c, index) => ({
        index,
        ...(chat ? { message: message(c, reasoning) } : { text: c.tokens.join('') }),
        ...(ids ? { token_ids: c.tokens.map(tokenId) } : {}),
        finish_reason: c.finish,
      })),
      usage: { completion_tokens: choices.reduce((s, c) => s + c.tokens.length, 0) },
    });
  }

  /**
   * One choice for a prompt text after `prefix` (a continuation) under `seed`, cut at maxTokens;
   * `thinking`: how many of its tokens come before the closing sentence.
   */
  private choice(key: string, prefix: string, seed: number, maxTokens: number): { tokens: string[]; finish: string; thinking: number } {
    const all = this.model.respond(this.byText.get(key), key, seed).tokens;
    const skip = countSimTokens(prefix);
    const full = all.slice(skip);
    const cut = full.length > maxTokens;
    const tokens = cut ? full.slice(0, maxTokens) : full;
    return { tokens, finish: cut ? 'length' : 'stop', thinking: Math.min(tokens.length, Math.max(0, all.length - SIM_ANSWER_TOKENS - skip)) };
  }

  /** Validates a request; returns the prompt key, partial prefix and sampling fields, or an error. */
  private parse(body: Record<string, unknown>, chat: boolean) {
    if (this.profile === 'openai') {
      const vendor = ['return_token_ids', 'continue_final_message', 'add_generation_prompt'].find((k) => body[k] !== undefined);
      if (vendor !== undefined) return `Unrecognized request argument supplied: ${vendor}`;
    }
    const n = body.n ?? 1;
    if (typeof n !== 'number' || !Number.isInteger(n) || n < 1) return `"n" must be a positive integer, got ${JSON.stringify(n)}`;
    if (n > SIM_MAX_N) return tooManyChoices(n);
    const maxTokens = body.max_tokens ?? 16;
    if (typeof maxTokens !== 'number' || !Number.isInteger(maxTokens) || maxTokens < 1) return `"max_tokens" must be a positive integer, got ${JSON.stringify(maxTokens)}`;
    const seed = body.seed ?? Math.floor(this.random() * 2 ** 30);
    if (typeof seed !== 'number' || !Number.isInteger(seed)) return `"seed" must be an integer, got ${JSON.stringify(seed)}`;
    let key: string;
    let prefix = '';
    if (chat) {
      const messages = body.messages;
      if (!Array.isArray(messages) || messages.length === 0) return '"messages" must be a non-empty array';
      const list = messages as { role?: unknown; content?: unknown }[];
      const last = list[list.length - 1]!;
      if (body.continue_final_message === true && last.role === 'assistant') prefix = String(last.content ?? '');
      const user = [...list].reverse().find((m) => m.role === 'user');
      if (user === undefined || typeof user.content !== 'string') return '"messages" needs a user message with string content';
      key = user.content;
    } else {
      if (typeof body.prompt !== 'string') return `"prompt" must be a string, got ${JSON.stringify(body.prompt) ?? 'nothing'}`;
      key = body.prompt;
      if (!this.byText.has(key)) {
        // A continuation: the longest known prompt that starts the text, then a partial response.
        let best = '';
        for (const text of this.byText.keys()) if (key.startsWith(text) && text.length > best.length) best = text;
        if (best !== '') {
          prefix = key.slice(best.length);
          key = best;
        }
      }
    }
    return { key, prefix, n, maxTokens, seed };
  }
}

function json(res: ServerResponse, status: number, value: unknown): void {
  if (res.destroyed) return;
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(value));
}

function error(message: string) {
  return { object: 'error', message, type: 'BadRequestError' };
}

/** A request's prompt tokens as the sim model counts them: the prompt's, or every message's. */
function promptTokens(body: Record<string, unknown>, chat: boolean): number {
  const texts = chat ? (body.messages as { content?: unknown }[]).map((m) => String(m.content ?? '')) : [String(body.prompt)];
  return texts.reduce((sum, text) => sum + countSimTokens(text) + 1, 0);
}

/**
 * The 400 body a server gives a request of `input` prompt tokens asking `maxTokens` more past a
 * context of `limit`, or undefined when it fits. vLLM 0.10–0.17
 * (vllm/entrypoints/openai/serving_engine.py `_validate_input`): the input alone at or past
 * the limit, or input + max_tokens past it. SGLang (sglang/srt/managers/tokenizer_manager.py
 * `_validate_one_request`): the input at or past it, or input + max_new_tokens at or past it.
 * OpenAI: input + max_tokens past it, code `context_length_exceeded`.
 */
function contextError(profile: SimProfile, limit: number, input: number, maxTokens: number): unknown {
  if (profile === 'openai') {
    if (input + maxTokens <= limit) return undefined;
    return {
      error: {
        message: `This model's maximum context length is ${limit} tokens. However, you requested ${input + maxTokens} tokens (${input} in the messages, ${maxTokens} in the completion). Please reduce the length of the messages or completion.`,
        type: 'invalid_request_error', param: 'messages', code: 'context_length_exceeded',
      },
    };
  }
  let message: string | undefined;
  if (profile === 'sglang') {
    if (input >= limit) message = `The input (${input} tokens) is longer than the model's context length (${limit} tokens).`;
    else if (input + maxTokens >= limit) {
      message = `Requested token count exceeds the model's maximum context length of ${limit} tokens. You requested a total of ${input + maxTokens} tokens: ` +
        `${input} tokens from the input messages and ${maxTokens} tokens for the completion. Please reduce the number of tokens in the input messages or the completion to fit within the limit.`;
    }
  } else if (input >= limit) {
    message = `This model's maximum context length is ${limit} tokens. However, your request has ${input} input tokens. Please reduce the length of the input messages.`;
  } else if (input + maxTokens > limit) {
    message = `'max_tokens' or 'max_completion_tokens' is too large: ${maxTokens}. This model's maximum context length is ${limit} tokens and your request has ${input} input tokens (${maxTokens} > ${limit} - ${input}).`;
  }
  return message === undefined ? undefined : { ...error(message), param: null, code: 400 };
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** A non-streamed chat choice's message: with `reasoning`, its thinking in that field and the rest (or null) as content. */
function message(c: SimChoice, reasoning: SimReasoningField | undefined): Record<string, unknown> {
  if (reasoning === undefined) return { role: 'assistant', content: c.tokens.join('') };
  const parts = chatDelta(c.tokens, 0, c.tokens.length, c.thinking ?? 0, reasoning);
  return { role: 'assistant', [reasoning]: parts[reasoning] ?? null, content: parts.content ?? null };
}
