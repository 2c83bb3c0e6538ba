import type { Readable, Writable } from 'node:stream';
import { RolloutBudgetError } from '../errors.js';
import type { Service, ServiceResponse } from './router.js';

/**
 * The service over NDJSON on stdin/stdout, for a trainer that owns the allocator as a child
 * process. One request a line: `{"id": any, "method": "POST", "path": "/v1/plan", "body": ...}`
 * (body: a JSON value, or a string sent as is, e.g. NDJSON results). One response a line, in
 * request order: `{"id": ..., "status": 200, "body": ...}` (/metrics: body is the text).
 * Requests are handled one at a time. A line over `lineLimit` bytes gets 413 and is skipped.
 */
export async function serveStdio(service: Service, input: Readable, output: Writable, lineLimit: number): Promise<void> {
  const write = (id: unknown, r: ServiceResponse) => {
    const body = r.contentType.startsWith('application/json') ? (JSON.parse(r.body) as unknown) : r.body;
    output.write(`${JSON.stringify({ id: id ?? null, status: r.status, body })}\n`);
  };
  const handleLine = async (line: string) => {
    if (line.trim() === '') return;
    let msg: unknown;
    try {
      msg = JSON.parse(line);
    } catch (error) {
      write(null, service.fail(new RolloutBudgetError('BAD_INPUT', `request: malformed JSON (${(error as Error).message}), got ${JSON.stringify(line.slice(0, 60))}`)));
      return;
    }
    if (msg === null || typeof msg !== 'object' || Array.isArray(msg)) {
      write(null, service.fail(new RolloutBudgetError('BAD_INPUT', `request: must be a JSON object {"id", "method", "path", "body"}, got ${JSON.stringify(msg)}`)));
      return;
    }
    const { id, method, path, body } = msg as Record<string, unknown>;
    if (typeof path !== 'string' || !path.startsWith('/')) {
      write(id, service.fail(new RolloutBudgetError('BAD_INPUT', `request: "path" must be a string starting with "/", got ${JSON.stringify(path) ?? 'nothing'}`)));
      return;
    }
    const m = method ?? (body === undefined ? 'GET' : 'POST');
    if (typeof m !== 'string') {
      write(id, service.fail(new RolloutBudgetError('BAD_INPUT', `request: "method" must be a string, got ${JSON.stringify(m)}`)));
      return;
    }
    const text = body === undefined ? '' : typeof body === 'string' ? body : JSON.stringify(body);
    write(id, await service.handle({ method: m, path, body: text }));
  };

  let pending = '';
  let pendingBytes = 0;
  let skipping = false;
  let chain = Promise.resolve();
  const enqueue = (line: string) => {
    chain = chain.then(() => handleLine(line));
  };
  const overLimit = () => {
    chain = chain.then(() => write(null, service.fail(new RolloutBudgetError('BAD_INPUT', `request: line longer than the limit of ${lineLimit} bytes (--body-limit), got more`), 413)));
  };
  input.setEncoding('utf8');
  try {
    await readLoop();
  } catch {
    // stdin destroyed (SIGTERM) or broken: answer what was already read, then stop
  }
  if (!skipping && pending.trim() !== '') enqueue(pending);
  await chain;

  async function readLoop(): Promise<void> {
    for await (const chunk of input as AsyncIterable<string>) {
      let start = 0;
      for (;;) {
        const nl = chunk.indexOf('\n', start);
        const piece = chunk.slice(start, nl < 0 ? chunk.length : nl);
        if (!skipping) {
          pending += piece;
          pendingBytes += Buffer.byteLength(piece);
          if (pendingBytes > lineLimit) {
            skipping = true;
            pending = '';
            overLimit();
          }
        }
        if (nl < 0) break;
        if (!skipping) enqueue(pending);
        pending = '';
        pendingBytes = 0;
        skipping = false;
        start = nl + 1;
      }
      await chain; // back-pressure: read on once the queued requests are answered
    }
  }
}
