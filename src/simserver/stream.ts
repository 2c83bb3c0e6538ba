/**
 * TEST DOUBLE — how the simulated server writes a streamed answer (server-sent events), in the
 * shape vLLM and SGLang stream OpenAI chunks: one `data:` event per choice update, a usage
 * chunk with `stream_options.include_usage`, then `data: [DONE]`. Options reproduce what the
 * event-stream standard allows and real servers or proxies do: CRLF line ends, comment lines
 * (keep-alive pings), and one event's data split over several `data:` lines.
 */
import type { ServerResponse } from 'node:http';
import { tokenId } from './model.js';

/** SSE formatting variants (all off: the plain `data: <json>\n\n` vLLM writes). */
export interface SimSse {
  /** CRLF instead of LF line ends. */
  readonly crlf: boolean;
  /** A comment line (`: ping`) before every event. */
  readonly comments: boolean;
  /** Each event's JSON pretty-printed over several `data:` lines (joined with \n by parsers). */
  readonly multiline: boolean;
}

export const plainSse: SimSse = { crlf: false, comments: false, multiline: false };

/** One choice being generated: its tokens, how many were sent, and its finish_reason. */
export interface SimChoice {
  readonly tokens: readonly string[];
  sent: number;
  readonly finish: string;
  /** How many of its first tokens are thinking, sent in StreamShape.reasoning's field (0 or undefined: none). */
  readonly thinking?: number;
}

/** The chat field a reasoning parser streams thinking in: SGLang's and vLLM's before 0.11, vLLM's from 0.11. */
export const SIM_REASONING_FIELDS = ['reasoning_content', 'reasoning'] as const;
export type SimReasoningField = (typeof SIM_REASONING_FIELDS)[number];

/**
 * What vLLM 0.10–0.11 streams when its engine fails during an answer it already began with a
 * 200: `create_streaming_error_response(str(e))`, code 400 by default (serving_chat.py and
 * serving_completion.py catch any exception of the stream; serving_engine.py), then `[DONE]`.
 */
export const ENGINE_ERROR_CHUNK = { error: { object: 'error', message: 'EngineCore encountered an issue. See stack trace (above) for the root cause. (sim-server fault)', type: 'BadRequestError', param: null, code: 400 } };

/** A chat delta of `text` sent as `field`'s thinking (its first `thinking` tokens) and content (the rest). */
export function chatDelta(tokens: readonly string[], from: number, upto: number, thinking: number, field: SimReasoningField | undefined): Record<string, string> {
  if (field === undefined || thinking <= from) return { content: tokens.slice(from, upto).join('') };
  const reasoned = tokens.slice(from, Math.min(upto, thinking)).join('');
  const content = tokens.slice(Math.max(from, thinking), upto).join('');
  return { [field]: reasoned, ...(content !== '' ? { content } : {}) };
}

/** What the stream writes per chunk. */
export interface StreamShape {
  readonly chat: boolean;
  readonly model: string;
  /** Per-choice `token_ids` in each chunk. */
  readonly ids: boolean;
  /** A final usage chunk. */
  readonly usage: boolean;
  /** Drop the connection after the first chunk of each choice. */
  readonly drop: boolean;
  readonly msPerToken: number;
  readonly sse: SimSse;
  /** Chat: the field thinking is streamed in (each choice's `thinking` tokens); undefined: all content. */
  readonly reasoning?: SimReasoningField;
  /** After the first chunk of each choice, the engine fails: ENGINE_ERROR_CHUNK, then [DONE]. */
  readonly engineError?: boolean;
}

const TICK_MS = 5;

/** One SSE event with `data`, formatted as `sse` says. */
export function sseEvent(data: string, sse: SimSse): string {
  const eol = sse.crlf ? '\r\n' : '\n';
  let lines = [data];
  if (sse.multiline && data.startsWith('{')) lines = JSON.stringify(JSON.parse(data), null, 1).split('\n');
  return `${sse.comments ? `: ping${eol}` : ''}${lines.map((l) => `data: ${l}`).join(eol)}${eol}${eol}`;
}

/**
 * Streams `choices` at `msPerToken` per token (all at once when 0). Calls `onComplete` per choice
 * that reached its finish and `onDrop` when the connection is dropped on purpose.
 */
export function streamChoices(res: ServerResponse, choices: SimChoice[], shape: StreamShape, hooks: { onComplete(): void; onDrop(): void; onClose(open: number): void; onEngineError?(): void }): void {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  const start = Date.now();
  const object = shape.chat ? 'chat.completion.chunk' : 'text_completion';
  const done = new Set<number>();
  let timer: NodeJS.Timeout | undefined;
  res.on('close', () => {
    if (timer !== undefined) clearTimeout(timer);
    hooks.onClose(choices.length - done.size);
  });
  const write = (value: unknown) => res.write(sseEvent(JSON.stringify(value), shape.sse));
  const tick = () => {
    timer = undefined;
    if (res.destroyed) return;
    // A dropped connection or a failed engine sends one token per choice first, so the client sees a partial stream.
    const due = shape.drop || shape.engineError === true ? 1 : shape.msPerToken > 0 ? Math.floor((Date.now() - start) / shape.msPerToken) : Infinity;
    choices.forEach((c, index) => {
      if (done.has(index)) return;
      const upto = Math.min(due, c.tokens.length);
      const piece = c.tokens.slice(c.sent, upto);
      const finished = upto >= c.tokens.length;
      if (piece.length > 0 || finished) {
        const delta = shape.chat ? { delta: chatDelta(c.tokens, c.sent, upto, c.thinking ?? 0, shape.reasoning) } : { text: piece.join('') };
        write({
          object, model: shape.model,
          choices: [{ index, ...delta, ...(shape.ids ? { token_ids: piece.map(tokenId) } : {}), finish_reason: finished ? c.finish : null }],
        });
      }
      c.sent = upto;
      if (finished) {
        done.add(index);
        hooks.onComplete();
      }
    });
    const open = choices.length - done.size;
    if (shape.drop && open > 0) {
      hooks.onDrop();
      res.destroy();
      return;
    }
    if (shape.engineError === true && open > 0) {
      hooks.onEngineError?.();
      write(ENGINE_ERROR_CHUNK);
      res.end(sseEvent('[DONE]', shape.sse));
      return;
    }
    if (open === 0) {
      if (shape.usage) write({ object, model: shape.model, choices: [], usage: { completion_tokens: choices.reduce((s, c) => s + c.tokens.length, 0) } });
      res.end(sseEvent('[DONE]', shape.sse));
      return;
    }
    timer = setTimeout(tick, TICK_MS);
  };
  tick();
}
