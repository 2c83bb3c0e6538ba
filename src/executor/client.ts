/**
 * One request to an OpenAI-compatible server (vLLM, SGLang, the sim-server): POST
 * /v1/completions or /v1/chat/completions, asked with `stream: true`. A streamed answer
 * (`text/event-stream`) is parsed by eventsource-parser (the WHATWG event-stream grammar:
 * CRLF / CR / LF line ends, multi-line `data:`, comments, `event:` and `id:` fields); a server or
 * proxy that ignores `stream` and answers one JSON body is parsed as that body. Streaming is
 * what lets an aborted request keep its partial text (APRIL). Tokens per choice come from the
 * choice itself: `token_ids` (vLLM's `return_token_ids`, SGLang's on /v1/completions), else
 * logprob entries, otherwise unknown; a single-choice request's usage chunk, when there is one,
 * overrides them (execute.ts: a reasoning parser leaves tokens out of the chunks).
 */
import { createParser } from 'eventsource-parser';
import { generationDispatcher } from './dispatcher-http.js';

/**
 * How a failed attempt is classified; only `retryable` ones are tried again. `too-long`: the
 * server refused the prompt with its max_tokens as longer than its context (a 400 that says so),
 * which no retry and no other request of the run can change.
 */
export class RequestError extends Error {
  constructor(
    message: string,
    readonly kind: 'retryable' | 'fatal' | 'cancelled' | 'too-long',
    readonly status?: number,
  ) {
    super(message);
    this.name = 'RequestError';
  }
}

/** Events of one choice as the server reports them. */
export interface ChoiceSink {
  /** New text and the number of tokens it holds (null: the server did not say). */
  delta(index: number, text: string, tokens: number | null): void;
  /** The choice's finish_reason, as the server wrote it ("stop", "length", "abort", ...). */
  finish(index: number, reason: string): void;
  /** completion_tokens of the whole request, when the server sends a usage object. */
  usage(completionTokens: number): void;
  /**
   * The choice sent reasoning text, which is not kept: vLLM's and SGLang's reasoning parsers
   * stream a thinking model's reasoning in `reasoning_content` (`reasoning` in vLLM ≥ 0.11), apart
   * from `content`, so a chat text cut there cannot be continued as the model wrote it.
   */
  reasoning?(index: number): void;
}

export interface StreamRequest {
  readonly url: string;
  readonly body: Record<string, unknown>;
  readonly chat: boolean;
  /** Sent as `Authorization: Bearer <key>` (a server started with --api-key). */
  readonly apiKey?: string;
  /** Called when the answer's headers arrive and with each piece of its body: the server is working on it. */
  readonly onActivity?: () => void;
  /** Aborts the attempt: a cancel by the caller, or the per-request timeout. */
  readonly signal: AbortSignal;
}

/** Largest event the SSE parser buffers (a chunk holds a few tokens; 16 MiB is far above any). */
const MAX_EVENT_CHARS = 16 * 1024 * 1024;

/**
 * Error codes that say the request can never succeed as sent (a URL fetch cannot parse, a host
 * name that does not exist): failed at once, never retried. Everything else a connection can
 * throw (refused, reset, DNS EAI_AGAIN, socket closed) is retried.
 */
const FATAL_CAUSES = new Set(['ERR_INVALID_URL', 'ENOTFOUND', 'ERR_INVALID_ARG_VALUE', 'ERR_INVALID_ARG_TYPE', 'UND_ERR_INVALID_ARG', 'ERR_UNSUPPORTED_PROTOCOL']);

/**
 * OpenSSL's verification failures as Node names them (node's src/crypto/crypto_common.cc
 * `X509ErrorCode`), and Node's own for a name the certificate does not cover: an https server
 * whose certificate this process does not trust, which no retry changes.
 */
const CERTIFICATE_CAUSES = new Set([
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE', 'UNABLE_TO_GET_ISSUER_CERT', 'UNABLE_TO_GET_ISSUER_CERT_LOCALLY', 'SELF_SIGNED_CERT_IN_CHAIN',
  'DEPTH_ZERO_SELF_SIGNED_CERT', 'CERT_HAS_EXPIRED', 'CERT_NOT_YET_VALID', 'CERT_UNTRUSTED', 'CERT_REJECTED', 'CERT_REVOKED',
  'CERT_SIGNATURE_FAILURE', 'INVALID_CA', 'INVALID_PURPOSE', 'PATH_LENGTH_EXCEEDED', 'CERT_CHAIN_TOO_LONG', 'HOSTNAME_MISMATCH',
  'ERR_TLS_CERT_ALTNAME_INVALID',
]);

/**
 * Why what `fetch` threw means the URL can never be sent as it is, or undefined when a retry
 * may succeed. Besides the codes above: Node's fetch (undici) refuses the Fetch standard's
 * "bad ports" (https://fetch.spec.whatwg.org/#port-blocking: 6000, 6665–6669, 10080, 22, ...)
 * with a cause of just "bad port" and no code, before any connection; an https:// server whose
 * certificate Node does not trust (CERTIFICATE_CAUSES), or a server that speaks plain HTTP on
 * an https:// URL (ERR_SSL_WRONG_VERSION_NUMBER), fails every try the same way.
 */
export function unsendable(error: unknown, url: string): string | undefined {
  const cause = (error as { cause?: { code?: unknown; message?: unknown } }).cause;
  const code = typeof cause?.code === 'string' ? cause.code : undefined;
  const message = (error as Error).message ?? String(error);
  if (cause?.message === 'bad port') {
    return `bad port: Node's fetch never connects to port ${new URL(url).port}, one the Fetch standard blocks (https://fetch.spec.whatwg.org/#port-blocking); run the server on another port`;
  }
  if (code !== undefined && CERTIFICATE_CAUSES.has(code)) {
    return `${code} (${String(cause?.message)}): the server's TLS certificate is not one this Node trusts: set NODE_EXTRA_CA_CERTS to the file of the CA that signed it (read when Node starts), or fix the certificate`;
  }
  if (code === 'ERR_SSL_WRONG_VERSION_NUMBER') {
    return `${code}: the server at that port speaks plain HTTP, not TLS: give its URL as http://`;
  }
  if ((code !== undefined && FATAL_CAUSES.has(code)) || /Failed to parse URL|Invalid URL/i.test(message)) {
    return `${code ?? message}${typeof cause?.message === 'string' ? ` (${cause.message})` : ''}`;
  }
  return undefined;
}

/** The token count a choice reports: its `token_ids`, else its logprob entries, else null. */
export function tokensOf(choice: Record<string, unknown>, chat: boolean): number | null {
  if (Array.isArray(choice.token_ids)) return choice.token_ids.length;
  const lp = choice.logprobs as Record<string, unknown> | null | undefined;
  if (lp !== null && lp !== undefined) {
    if (chat && Array.isArray(lp.content)) return lp.content.length;
    if (!chat && Array.isArray(lp.tokens)) return lp.tokens.length;
  }
  return null;
}

/** Classifies what `fetch` or a body read threw. */
function classify(error: unknown, req: StreamRequest, isTimeout: () => boolean): RequestError {
  if (error instanceof RequestError) return error;
  if (req.signal.aborted) {
    return isTimeout() ? new RequestError('request timed out', 'retryable') : new RequestError('cancelled', 'cancelled');
  }
  const why = unsendable(error, req.url);
  if (why !== undefined) return new RequestError(`cannot send to ${req.url}: ${why}`, 'fatal');
  const code = (error as { cause?: { code?: unknown } }).cause?.code;
  return new RequestError(`connection error (${typeof code === 'string' ? code : (error as Error).message ?? String(error)})`, 'retryable');
}

/**
 * A 400 for a prompt whose tokens and max_tokens do not fit the server's context. vLLM:
 * "This model's maximum context length is N tokens. However, your request has T input tokens"
 * and "'max_tokens' or 'max_completion_tokens' is too large: M. This model's maximum context
 * length is N tokens ..." (vllm/entrypoints/openai/serving_engine.py, 0.10–0.17), later "...
 * However, you requested M output tokens ..."; SGLang: "The input (T tokens) is longer than the
 * model's context length (N tokens)." and "Requested token count exceeds the model's maximum
 * context length of N tokens. ..." (sglang/srt/managers/tokenizer_manager.py), and from its
 * scheduler "Input length (T tokens) exceeds the maximum allowed length (N tokens). Use a shorter
 * input or enable --allow-auto-truncate." (`validate_input_length`, sglang/srt/managers/utils.py),
 * which a streamed request gets as an error chunk after a 200 (answerError); OpenAI: code
 * `context_length_exceeded`.
 */
export const TOO_LONG = /maximum context length|longer than the model's context length|context_length_exceeded|exceeds the maximum allowed length/i;

/** The header that carries an API key, or none. */
export function authorization(apiKey: string | undefined): Record<string, string> {
  return apiKey === undefined ? {} : { authorization: `Bearer ${apiKey}` };
}

/**
 * What a 401 or 403 means: vLLM and SGLang started with `--api-key` answer 401
 * `{"error": "Unauthorized"}` to a request without that key as `Authorization: Bearer`
 * (vLLM: AuthenticationMiddleware, vllm/entrypoints/openai/api_server.py, server_utils.py in
 * later versions; SGLang: add_api_key_middleware, sglang/srt/utils.py). The key is never shown.
 */
export function refusedKey(status: number, url: string, text: string, apiKey: string | undefined): string {
  const said = `HTTP ${status} from ${url}: ${text.slice(0, 200)}`;
  return apiKey === undefined
    ? `${said}: the server wants an API key (vLLM and SGLang started with --api-key): give it with --api-key or $OPENAI_API_KEY`
    : `${said}: the server refused the API key given (--api-key, else $OPENAI_API_KEY): give the key the server was started with`;
}

/** The `message` of a server's error body (`{"message"}` or `{"error": {"message"}}`), else its text. */
function serverMessage(text: string): string {
  try {
    const body = JSON.parse(text) as { message?: unknown; error?: { message?: unknown } };
    const message = body.message ?? body.error?.message;
    if (typeof message === 'string') return message.slice(0, 300);
  } catch {
    // not JSON: the text itself
  }
  return text.slice(0, 300);
}

/**
 * Sends one request and feeds its events to `sink`. Resolves when the server sends `[DONE]`,
 * when a streamed answer ends (the caller checks every choice finished), or after a JSON
 * answer; rejects with a RequestError: 5xx, 429, connection errors, timeouts and malformed
 * chunks are retryable, a 400 for a prompt too long for the server's context too-long, other
 * 4xx and unsendable URLs fatal, a caller abort cancelled.
 */
export async function streamRequest(req: StreamRequest, sink: ChoiceSink, isTimeout: () => boolean): Promise<void> {
  let response: Response;
  try {
    response = await fetch(req.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'text/event-stream, application/json', ...authorization(req.apiKey) },
      body: JSON.stringify(req.body),
      signal: req.signal,
      // undici's own 300 s limits off: --timeout-s decides (dispatcher-http.ts).
      dispatcher: generationDispatcher(),
    } as RequestInit);
  } catch (error) {
    throw classify(error, req, isTimeout);
  }
  req.onActivity?.();
  if (!response.ok) {
    const text = await response.text().catch(() => '');
    if (response.status === 400 && TOO_LONG.test(text)) throw new RequestError(serverMessage(text), 'too-long', 400);
    if (response.status === 401 || response.status === 403) throw new RequestError(refusedKey(response.status, req.url, text, req.apiKey), 'fatal', response.status);
    const detail = `HTTP ${response.status} from ${req.url}: ${text.slice(0, 300)}`;
    throw new RequestError(detail, response.status >= 500 || response.status === 429 ? 'retryable' : 'fatal', response.status);
  }
  if (response.body === null) throw new RequestError(`empty body from ${req.url}`, 'retryable');
  const type = response.headers.get('content-type') ?? '';
  try {
    if (!type.includes('text/event-stream')) {
      // A server or proxy that ignored `stream: true`: one JSON body with every choice.
      const text = await response.text();
      let body: unknown;
      try {
        body = JSON.parse(text);
      } catch {
        throw new RequestError(`malformed response body from ${req.url} (content-type ${type || 'none'}): ${text.slice(0, 120)}`, 'retryable');
      }
      handleChunk(body, req.chat, sink, 'message');
      return;
    }
    let done = false;
    let failure: unknown = null;
    const parser = createParser({
      maxBufferSize: MAX_EVENT_CHARS,
      onEvent(event) {
        if (done || failure !== null) return;
        const data = event.data.trim();
        if (data === '[DONE]') {
          done = true;
          return;
        }
        if (data === '') return;
        try {
          handleChunk(parseChunk(data), req.chat, sink, 'delta');
        } catch (error) {
          failure = error;
        }
      },
      onError(error) {
        if (failure === null) failure = new RequestError(`malformed event stream from ${req.url}: ${error.message}`, 'retryable');
      },
    });
    const decoder = new TextDecoder();
    for await (const bytes of response.body as unknown as AsyncIterable<Uint8Array>) {
      req.onActivity?.();
      parser.feed(decoder.decode(bytes, { stream: true }));
      if (failure !== null) throw failure;
      if (done) return;
    }
    // The body ended: end a last event the server did not close with a blank line.
    parser.feed(`${decoder.decode()}\n\n`);
    if (failure !== null) throw failure;
  } catch (error) {
    throw classify(error, req, isTimeout);
  }
}

function parseChunk(data: string): unknown {
  try {
    return JSON.parse(data);
  } catch {
    throw new RequestError(`malformed stream chunk: ${data.slice(0, 120)}`, 'retryable');
  }
}

/**
 * The error an answer carries after a 200, or undefined: an `error` object in a chunk (vLLM and
 * SGLang send one mid-stream: SGLang for a request its scheduler aborted with an HTTP status,
 * serving_completions.py, such as an input longer than its context), or a whole body that is an
 * error (`"object": "error"`, vLLM's and SGLang's `ErrorResponse`, as a proxy may pass on with a
 * 200). A prompt too long for the context is too-long; another 4xx code (not 408 or 429) can
 * never succeed as sent, so is fatal, with the server's message; anything else is retryable.
 * Except code 400 in a stream (`inStream`): vLLM 0.10–0.11 sends every exception of a streaming
 * generator as a chunk with code 400 (`create_streaming_error_response`'s default status,
 * serving_engine.py), its engine's death (EngineDeadError: "EngineCore encountered an issue")
 * included, so there it says nothing of the request: retried, on another replica where there is
 * one. A request that is wrong as sent is refused before the 200, with an HTTP 400.
 */
function answerError(chunk: Record<string, unknown>, inStream: boolean): RequestError | undefined {
  const error = chunk.object === 'error' ? chunk : chunk.error;
  if (error === undefined || error === null) return undefined;
  const fields = typeof error === 'object' ? (error as { message?: unknown; code?: unknown }) : {};
  const message = typeof fields.message === 'string' ? fields.message.slice(0, 300) : JSON.stringify(error).slice(0, 200);
  const code = typeof fields.code === 'number' ? fields.code : typeof fields.code === 'string' && /^\d{3}$/.test(fields.code) ? Number(fields.code) : undefined;
  if ((code === undefined || code === 400) && TOO_LONG.test(message)) return new RequestError(message, 'too-long', 400);
  if (inStream && code === 400) return new RequestError(`server error in the answer (code 400, which vLLM sends for a failure of its engine too): ${message}`, 'retryable', 400);
  if (code !== undefined && code >= 400 && code < 500 && code !== 408 && code !== 429) {
    return new RequestError(`the server refused the request in its answer (code ${code}): ${message}`, 'fatal', code);
  }
  return new RequestError(`server error in the answer: ${message}`, 'retryable');
}

/**
 * Feeds one chunk (`delta` choices) or one whole answer (`message` choices) to the sink, or
 * throws the error it carries (answerError).
 */
function handleChunk(value: unknown, chat: boolean, sink: ChoiceSink, kind: 'delta' | 'message'): void {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw new RequestError(`malformed chunk: ${JSON.stringify(value).slice(0, 120)}`, 'retryable');
  const chunk = value as Record<string, unknown>;
  const error = answerError(chunk, kind === 'delta');
  if (error !== undefined) throw error;
  const choices = chunk.choices;
  for (const raw of Array.isArray(choices) ? (choices as Record<string, unknown>[]) : []) {
    if (raw === null || typeof raw !== 'object' || typeof raw.index !== 'number') continue;
    const part = chat ? (raw[kind] as { content?: unknown; reasoning_content?: unknown; reasoning?: unknown } | undefined) : undefined;
    const content = chat ? part?.content : raw.text;
    const text = typeof content === 'string' ? content : '';
    const reasoned = chat && ((typeof part?.reasoning_content === 'string' && part.reasoning_content !== '') || (typeof part?.reasoning === 'string' && part.reasoning !== ''));
    if (reasoned) sink.reasoning?.(raw.index);
    const tokens = tokensOf(raw, chat);
    // Reasoning is generated tokens too, not kept as text: a choice cut at max_tokens while still
    // thinking sends no `content` at all, and was counted 0 tokens (its count: the ids sent with
    // it, else unknown, else the usage chunk of a single-choice request).
    if (text.length > 0 || (tokens ?? 0) > 0 || reasoned) sink.delta(raw.index, text, tokens);
    if (typeof raw.finish_reason === 'string') sink.finish(raw.index, raw.finish_reason);
  }
  const usage = chunk.usage as { completion_tokens?: unknown } | null | undefined;
  if (usage && typeof usage.completion_tokens === 'number') sink.usage(usage.completion_tokens);
}
