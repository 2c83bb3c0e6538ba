import type { Readable, Writable } from 'node:stream';
import { RolloutBudgetError, quote } from '../errors.js';
import { parseJson } from '../io/jsonl.js';
import { decodeUtf8 } from '../io/utf8.js';
import { checkLimit } from './limit.js';
import type { Service, ServiceResponse } from './router.js';

/**
 * The service over NDJSON on stdin/stdout, for a trainer that owns the allocator as a child
 * process. One request a line: `{"id": any, "method": "POST", "path": "/v1/plan", "body": ...}`
 * (body: a JSON value, or a string sent as is, e.g. NDJSON results). One response a line, in
 * request order: `{"id": ..., "status": 200, "body": ...}` (/metrics: body is the text).
 * Requests are handled one at a time. A line over `lineLimit` bytes gets 413 and is skipped;
 * a line that is not UTF-8, not JSON or nested too deep gets 400 (id null). No line stops the
 * loop: only the end of input (or a destroyed stdin) does, or the output's reader going away.
 * Resolves with which of the two ended it.
 */
export async function serveStdio(service: Service, input: Readable, output: Writable, lineLimit: number): Promise<'end of input' | 'output closed'> {
  checkLimit('lineLimit', lineLimit); // NaN or undefined let every line through whole, as HttpOptions.bodyLimit did
  // The reader of the responses went away (EPIPE: the trainer that owned this process exited):
  // nothing more can be answered, so stop reading, finish the request in hand, skip those
  // queued behind it, and end, where Node would crash on the unhandled 'error' event.
  let closed = false;
  output.on('error', () => {
    closed = true;
    input.destroy();
  });
  const write = (id: unknown, r: ServiceResponse) => {
    if (closed) return;
    const body = r.contentType.startsWith('application/json') ? (JSON.parse(r.body) as unknown) : r.body;
    output.write(`${JSON.stringify({ id: id ?? null, status: r.status, body })}\n`);
  };
  const handleLine = async (bytes: Buffer, n: number) => {
    if (closed) return; // read before the reader went away: no one would get its answer
    const where = `request line ${n}`;
    let msg: unknown;
    try {
      const line = decodeUtf8(bytes, where, false);
      if (line.trim() === '') return;
      msg = parseJson(line, where);
    } catch (error) {
      write(null, service.fail(error));
      return;
    }
    if (msg === null || typeof msg !== 'object' || Array.isArray(msg)) {
      write(null, service.fail(new RolloutBudgetError('BAD_INPUT', `${where}: must be a JSON object {"id", "method", "path", "body"}, got ${quote(msg)}`)));
      return;
    }
    const { id, method, path, body } = msg as Record<string, unknown>;
    if (typeof path !== 'string' || !path.startsWith('/')) {
      write(id, service.fail(new RolloutBudgetError('BAD_INPUT', `${where}: "path" must be a string starting with "/", got ${quote(path)}`)));
      return;
    }
    const m = method ?? (body === undefined ? 'GET' : 'POST');
    if (typeof m !== 'string') {
      write(id, service.fail(new RolloutBudgetError('BAD_INPUT', `${where}: "method" must be a string, got ${quote(m)}`)));
      return;
    }
    const text = body === undefined ? '' : typeof body === 'string' ? body : JSON.stringify(body);
    write(id, await service.handle({ method: m, path, body: text }));
  };

  // Lines are split as bytes and decoded whole, so a character cut by a chunk boundary is fine.
  let pending: Buffer[] = [];
  let pendingBytes = 0;
  let skipping = false;
  let chain = Promise.resolve();
  let lineNo = 0; // counted as lines are read, so a number is right whatever the queue holds
  const enqueue = (line: Buffer) => {
    const n = ++lineNo;
    chain = chain.then(() => handleLine(line, n));
  };
  const overLimit = () => {
    const where = `request line ${++lineNo}`;
    chain = chain.then(() => write(null, service.fail(new RolloutBudgetError('BAD_INPUT', `${where}: longer than the limit of ${lineLimit} bytes (--body-limit), got more`), 413)));
  };
  try {
    await readLoop();
  } catch {
    // stdin destroyed (SIGTERM) or broken: answer what was already read, then stop
  }
  if (!skipping && pendingBytes > 0 && !closed) enqueue(Buffer.concat(pending));
  await chain;
  return closed ? 'output closed' : 'end of input';

  async function readLoop(): Promise<void> {
    for await (const data of input as AsyncIterable<Buffer | string>) {
      const chunk = typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
      let start = 0;
      for (;;) {
        const nl = chunk.indexOf(0x0a, start);
        const piece = chunk.subarray(start, nl < 0 ? chunk.length : nl);
        if (!skipping) {
          pending.push(piece);
          pendingBytes += piece.length;
          if (pendingBytes > lineLimit) {
            skipping = true;
            pending = [];
            overLimit();
          }
        }
        if (nl < 0) break;
        if (!skipping) enqueue(Buffer.concat(pending));
        pending = [];
        pendingBytes = 0;
        skipping = false;
        start = nl + 1;
      }
      await chain; // back-pressure: read on once the queued requests are answered
    }
  }
}
