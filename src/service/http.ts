import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { RolloutBudgetError, badOption, quote } from '../errors.js';
import { decodeUtf8 } from '../io/utf8.js';
import { checkKnownKeys } from '../plan/options.js';
import { RequestGuard, type GuardOptions } from './guard.js';
import { checkLimit } from './limit.js';
import type { Service, ServiceResponse } from './router.js';

export interface HttpOptions {
  readonly host: string;
  /** 0 picks a free port. */
  readonly port: number;
  /** Largest request body in bytes; larger ones get 413 and are not kept (the rest is drained: `refuse`). */
  readonly bodyLimit: number;
  /** Bearer token required on every request but GET /healthz (guard.ts); none when undefined. */
  readonly token?: string;
  /** Host header names accepted besides IP addresses, localhost, `host` and this machine's name; `*`: any. */
  readonly allowedHosts?: readonly string[];
  /**
   * After close(), how long connections still open (a request in flight, a client that sends
   * slowly) may take before they are cut; default 10 s.
   */
  readonly closeGraceMs?: number;
  /**
   * How long a new connection may stay silent before its first request; one that does is
   * closed (default 10 s; each byte it sends starts the time again, and from the first one
   * Node's headersTimeout applies). Node's own timeouts count only from a request's first
   * byte, so a connection that sends nothing would hold a file descriptor for good, and enough
   * of them leave the service unable to accept anyone (every new connection reset at the
   * process's limit of open files).
   */
  readonly firstRequestMs?: number;
}

export interface HttpService {
  readonly server: Server;
  readonly port: number;
  /** Stops accepting, lets in-flight requests finish (up to closeGraceMs), then resolves. */
  close(): Promise<void>;
}

/**
 * How much of a refused request's body is still read, and for how long, before its connection
 * is cut: a client that sends its whole body before it reads (Python's http.client, as the
 * package's client does) then gets the answer (401, 413) instead of a connection reset, which
 * it took for a service that could not be reached and retried for 25 s. Bounded, so a client
 * that sends without end is cut all the same.
 */
const DRAIN_BYTES = 64 << 20;
const DRAIN_MS = 10_000;

/**
 * Answers a request refused before its body was read. Not with `connection: close`: Node then
 * destroys the socket once the answer is written, and the body still arriving made the client's
 * kernel reset the connection. Node reads and discards the rest of the body of a request whose
 * answer is done (its `_dump`); the connection is cut once DRAIN_BYTES more arrive or DRAIN_MS
 * pass, else it stays open for the next request.
 */
function refuse(req: IncomingMessage, res: ServerResponse, answer: ServiceResponse): void {
  send(res, answer);
  if (req.complete) return;
  let left = DRAIN_BYTES;
  const cut = (): void => {
    clearTimeout(timer);
    req.destroy();
  };
  const timer = setTimeout(cut, DRAIN_MS);
  timer.unref();
  req.on('data', (chunk: Buffer) => {
    left -= chunk.length;
    if (left <= 0) cut();
  });
  req.on('end', () => clearTimeout(timer));
  req.on('error', () => clearTimeout(timer));
}

function tooLarge(limit: number, got: string): RolloutBudgetError {
  return new RolloutBudgetError('BAD_INPUT', `body: larger than the limit of ${limit} bytes (--body-limit), got ${got}`);
}

function send(res: ServerResponse, r: ServiceResponse, close = false): void {
  res.writeHead(r.status, {
    ...r.headers,
    'content-type': r.contentType,
    'content-length': Buffer.byteLength(r.body),
    ...(close ? { connection: 'close' } : {}),
  });
  res.end(r.body);
}

/** Reads the body up to `limit` bytes; null when it went over (the rest is not read). */
function readBody(req: IncomingMessage, limit: number): Promise<Buffer | null> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let over = false;
    req.on('data', (chunk: Buffer) => {
      if (over) return;
      size += chunk.length;
      if (size > limit) {
        over = true;
        resolve(null);
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => {
      if (!over) resolve(Buffer.concat(chunks));
    });
    req.on('error', reject);
  });
}

/**
 * Serves a Service over HTTP/1.1 on host:port (keep-alive, JSON bodies). A request the guard
 * refuses (Host, Origin, token, content type: guard.ts) is answered from its headers, its body
 * never read.
 */
export async function startHttpService(service: Service, options: HttpOptions): Promise<HttpService> {
  checkHttpOptions(options);
  let closing = false;
  const guardOptions: GuardOptions = {
    listenHost: options.host,
    ...(options.token === undefined ? {} : { token: options.token }),
    ...(options.allowedHosts === undefined ? {} : { allowedHosts: options.allowedHosts }),
  };
  const guard = new RequestGuard(guardOptions);
  /**
   * Why a request is refused from its head alone (guard.ts, a declared body over the limit), or
   * undefined; `answer` makes the response (and counts it in the metrics).
   */
  const headRefusal = (req: IncomingMessage): { answer: () => ServiceResponse } | undefined => {
    const path = req.url ?? '/';
    const refusal = guard.check({ method: req.method ?? 'GET', path, headers: req.headers, httpVersion: req.httpVersion, hostLines: req.headersDistinct.host?.length ?? 0 });
    if (refusal !== undefined) return { answer: () => service.refuse(path, refusal.status, refusal.code, refusal.message, refusal.headers) };
    const declared = Number(req.headers['content-length'] ?? 0);
    if (declared > options.bodyLimit) return { answer: () => service.fail(tooLarge(options.bodyLimit, `${declared}`), 413) };
    return undefined;
  };
  // A request without Host reaches the guard, which answers it with a JSON 400 (Node's own had no body).
  const server = createServer({ requireHostHeader: false }, (req, res) => {
    req.socket.setTimeout(0); // its head is in: firstRequestMs no longer applies
    const arrivedMs = performance.now();
    void (async () => {
      const method = req.method ?? 'GET';
      const path = req.url ?? '/';
      const early = headRefusal(req);
      if (early !== undefined) {
        refuse(req, res, early.answer());
        return;
      }
      let raw: Buffer | null;
      try {
        raw = await readBody(req, options.bodyLimit);
      } catch {
        return; // the client went away mid-body: nothing to answer, nothing applied
      }
      if (raw === null) {
        refuse(req, res, service.fail(tooLarge(options.bodyLimit, `more`), 413));
        return;
      }
      let body: string;
      try {
        body = decodeUtf8(raw, 'body');
      } catch (error) {
        send(res, service.fail(error, 400));
        return;
      }
      // The client going away (its connection closed before the answer) stops a plan still waiting for a thread.
      const gone = new AbortController();
      res.on('close', () => {
        if (!res.writableFinished) gone.abort();
      });
      const answer = await service.handle({ method, path, body, signal: gone.signal, arrivedMs });
      send(res, answer, closing); // while stopping, a kept-alive connection ends with its last answer
    })().catch((error) => {
      if (!res.headersSent) send(res, service.fail(error));
    });
  });
  // `Expect: 100-continue`: a request to be refused gets its answer instead of "100 Continue"
  // (Node sent that first, and the client sent the body it was about to be refused for).
  server.on('checkContinue', (req, res) => {
    if (headRefusal(req) === undefined) res.writeContinue();
    server.emit('request', req, res);
  });
  // An `Expect:` other than 100-continue: Node answered a bare 417, no JSON, not in /metrics.
  server.on('checkExpectation', (req: IncomingMessage, res: ServerResponse) => {
    send(res, service.refuse(req.url ?? '', 417, 'EXPECTATION_FAILED', `Expect: ${JSON.stringify(req.headers.expect ?? '')} is not supported: only 100-continue (or no Expect header)`), true);
  });
  // CONNECT has no handler of its own, so Node closed the socket without an answer: a 405.
  server.on('connect', (req: IncomingMessage, socket: import('node:net').Socket) => {
    const r = service.refuse(req.url ?? '', 405, 'METHOD_NOT_ALLOWED', 'CONNECT is not served: this is the rollout-budget service, not a proxy');
    socket.end(`HTTP/1.1 405 Method Not Allowed\r\ncontent-type: ${r.contentType}\r\ncontent-length: ${Buffer.byteLength(r.body)}\r\nconnection: close\r\n\r\n${r.body}`);
  });
  // A request Node's parser cannot read (not HTTP, headers too large, too slow): a JSON error too.
  server.on('clientError', (error: NodeJS.ErrnoException, socket) => {
    // (as Node's own handler does: a socket whose response has begun gets no second one)
    const answering = (socket as { _httpMessage?: { headersSent?: boolean } })._httpMessage?.headersSent === true;
    // HPE_INVALID_EOF_STATE: the client closed mid-head (a timeout, a port scan): no one to
    // answer, and not counted as an answered 400 (1,500 of them in a slowloris run's metrics).
    if (error.code === 'ECONNRESET' || error.code === 'HPE_INVALID_EOF_STATE' || !socket.writable || answering) {
      socket.destroy();
      return;
    }
    const status = error.code === 'HPE_HEADER_OVERFLOW' ? 431 : error.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 408 : 400;
    const reason = status === 431 ? 'Request Header Fields Too Large' : status === 408 ? 'Request Timeout' : 'Bad Request';
    const r = service.refuse('', status, status === 400 ? 'BAD_REQUEST' : status === 431 ? 'HEADERS_TOO_LARGE' : 'REQUEST_TIMEOUT', `not a readable HTTP/1.1 request (${error.code ?? error.message})`);
    socket.end(`HTTP/1.1 ${status} ${reason}\r\ncontent-type: ${r.contentType}\r\ncontent-length: ${Buffer.byteLength(r.body)}\r\nconnection: close\r\n\r\n${r.body}`);
  });
  server.keepAliveTimeout = 5_000;
  server.requestTimeout = 60_000;
  // A socket's timeout with no request on it is Node's to handle: the socket is destroyed.
  // Between requests on a kept-alive connection Node sets its own (keepAliveTimeout).
  const firstRequestMs = options.firstRequestMs ?? 10_000;
  server.on('connection', (socket) => socket.setTimeout(firstRequestMs));
  await new Promise<void>((resolve, reject) => {
    server.once('error', (error: NodeJS.ErrnoException) =>
      reject(new RolloutBudgetError('IO_ERROR', `cannot listen on ${options.host}:${options.port} (${error.code ?? error.message})`)));
    server.listen(options.port, options.host, () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  return {
    server,
    port,
    close: () =>
      new Promise<void>((resolve) => {
        closing = true;
        const cut = setTimeout(() => server.closeAllConnections(), options.closeGraceMs ?? 10_000);
        cut.unref();
        server.close(() => {
          clearTimeout(cut);
          resolve();
        });
        server.closeIdleConnections();
        void service.idle().then(() => server.closeIdleConnections());
      }),
  };
}

const HTTP_KEYS = ['host', 'port', 'bodyLimit', 'token', 'allowedHosts', 'closeGraceMs', 'firstRequestMs'];

/**
 * A library caller's HttpOptions, checked as `serve`'s flags are (stylerev review, 2026-11-29):
 * a misspelt `bodyLimt`, or a `bodyLimit` of NaN, compared every body against undefined or NaN,
 * which no size exceeds, so an 8.5 MB body was read whole and answered 200. Unknown keys,
 * `bodyLimit` (an integer in [1, MAX_STRING_LENGTH]), `port` and the two times. O(1).
 */
export function checkHttpOptions(options: HttpOptions): void {
  checkKnownKeys(options, HTTP_KEYS, 'http options');
  checkLimit('bodyLimit', options.bodyLimit);
  if (!Number.isSafeInteger(options.port) || options.port < 0 || options.port > 65_535) {
    throw badOption(`port must be an integer from 0 to 65535, got ${quote(options.port)}`, ['port']);
  }
  for (const key of ['closeGraceMs', 'firstRequestMs'] as const) {
    const v: unknown = options[key];
    if (v !== undefined && !(typeof v === 'number' && v >= 0 && v < Infinity)) throw badOption(`${key} must be a finite number of milliseconds ≥ 0, got ${quote(v)}`, [key]);
  }
}
