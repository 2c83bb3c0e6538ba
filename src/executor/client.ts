/**
 * One streaming request to an OpenAI-compatible server (vLLM, SGLang, the sim-server):
 * POST /v1/completions or /v1/chat/completions with `stream: true`, parsed as server-sent
 * events. Streaming is what lets an aborted request keep its partial text (APRIL). Tokens per
 * choice come from the choice itself: `token_ids` (vLLM's `return_token_ids`), else logprob
 * entries, else — for a single-choice request only — the usage chunk; otherwise unknown.
 */

/** How a failed attempt is classified; only `retryable` ones are tried again. */
export class RequestError extends Error {
  constructor(
    message: string,
    readonly kind: 'retryable' | 'fatal' | 'cancelled',
    readonly status?: number,
  ) {
    super(message);
    this.name = 'RequestError';
  }
}

/** Events of one choice as the stream reports them. */
export interface ChoiceSink {
  /** New text and the number of tokens it holds (null: the server did not say). */
  delta(index: number, text: string, tokens: number | null): void;
  finish(index: number, reason: string): void;
  /** completion_tokens of the whole request, when the server sends a usage chunk. */
  usage(completionTokens: number): void;
}

export interface StreamRequest {
  readonly url: string;
  readonly body: Record<string, unknown>;
  readonly chat: boolean;
  /** Aborts the attempt: a cancel by the caller, or the per-request timeout. */
  readonly signal: AbortSignal;
}

function tokensOf(choice: Record<string, unknown>, chat: boolean): number | null {
  if (Array.isArray(choice.token_ids)) return choice.token_ids.length;
  const lp = choice.logprobs as Record<string, unknown> | null | undefined;
  if (lp !== null && lp !== undefined) {
    if (chat && Array.isArray(lp.content)) return lp.content.length;
    if (!chat && Array.isArray(lp.tokens)) return lp.tokens.length;
  }
  return null;
}

/**
 * Sends one streaming request and feeds its events to `sink`. Resolves when the server sends
 * `[DONE]`; rejects with a RequestError: 5xx, connection errors, timeouts and a stream that
 * ends early are retryable, 4xx fatal, a caller abort cancelled.
 */
export async function streamRequest(req: StreamRequest, sink: ChoiceSink, isTimeout: () => boolean): Promise<void> {
  let response: Response;
  const classify = (error: unknown): RequestError => {
    if (error instanceof RequestError) return error;
    if (req.signal.aborted) {
      return isTimeout() ? new RequestError('request timed out', 'retryable') : new RequestError('cancelled', 'cancelled');
    }
    const cause = (error as { cause?: { code?: string } }).cause?.code;
    return new RequestError(`connection error (${cause ?? (error as Error).message})`, 'retryable');
  };
  try {
    response = await fetch(req.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'text/event-stream' },
      body: JSON.stringify(req.body),
      signal: req.signal,
    });
  } catch (error) {
    throw classify(error);
  }
  if (!response.ok) {
    const text = await response.text().catch(() => '');
    const detail = `HTTP ${response.status} from ${req.url}: ${text.slice(0, 300)}`;
    throw new RequestError(detail, response.status >= 500 || response.status === 429 ? 'retryable' : 'fatal', response.status);
  }
  if (response.body === null) throw new RequestError(`empty body from ${req.url}`, 'retryable');
  const decoder = new TextDecoder();
  let buffer = '';
  try {
    for await (const bytes of response.body as unknown as AsyncIterable<Uint8Array>) {
      buffer += decoder.decode(bytes, { stream: true });
      let cut: number;
      while ((cut = buffer.indexOf('\n\n')) >= 0) {
        const event = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        for (const line of event.split('\n')) {
          if (!line.startsWith('data:')) continue;
          const data = line.slice(5).trim();
          if (data === '[DONE]') return;
          handleChunk(data, req.chat, sink);
        }
      }
    }
  } catch (error) {
    throw classify(error);
  }
  throw new RequestError(`stream from ${req.url} ended before [DONE]`, 'retryable');
}

function handleChunk(data: string, chat: boolean, sink: ChoiceSink): void {
  let chunk: Record<string, unknown>;
  try {
    chunk = JSON.parse(data) as Record<string, unknown>;
  } catch {
    throw new RequestError(`malformed stream chunk: ${data.slice(0, 120)}`, 'retryable');
  }
  if (chunk.error !== undefined) throw new RequestError(`server error in stream: ${JSON.stringify(chunk.error).slice(0, 200)}`, 'retryable');
  const usage = chunk.usage as { completion_tokens?: unknown } | null | undefined;
  if (usage && typeof usage.completion_tokens === 'number') sink.usage(usage.completion_tokens);
  for (const raw of (chunk.choices as Record<string, unknown>[] | undefined) ?? []) {
    const index = raw.index as number;
    const text = chat ? String((raw.delta as { content?: unknown } | undefined)?.content ?? '') : String(raw.text ?? '');
    const tokens = tokensOf(raw, chat);
    if (text.length > 0 || (tokens ?? 0) > 0) sink.delta(index, text, tokens);
    if (typeof raw.finish_reason === 'string') sink.finish(index, raw.finish_reason);
  }
}
