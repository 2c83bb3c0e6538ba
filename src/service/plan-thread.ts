/**
 * The body of a planning thread (worker_threads), started by PlanWorkers: it owns its own
 * store connection and allocator, so only the request text and the plan text cross threads.
 * A plan that runs too long is stopped by terminating the whole thread.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { RolloutBudgetError } from '../errors.js';
import { checkSameFile } from '../store/file-identity.js';
import { openAsyncStore } from '../store/open.js';
import { planJsonCompact } from '../plan/serialize.js';
import { AsyncAllocator } from './async-allocator.js';
import type { PlanThreadInit, PlanThreadReply, PlanThreadRequest } from './plan-runner.js';
import { checkNames, planRequestOf } from './requests.js';

const init = workerData as PlanThreadInit;
const port = parentPort!;
let opening: Promise<AsyncAllocator> | undefined;

/** The allocator, opened on first use; a failed open is tried again by the next request. */
function allocator(): Promise<AsyncAllocator> {
  if (init.file !== undefined) checkSameFile(init.state, init.file);
  opening ??= openAsyncStore(init.state).then(
    (store) => new AsyncAllocator(store, init.defaults),
    (error: unknown) => {
      opening = undefined;
      throw error;
    },
  );
  return opening;
}

async function plan(body: string): Promise<string> {
  const a = await allocator();
  const r = planRequestOf(body);
  checkNames(r.options, a.registries);
  // The plan's JSON made from its columns (plan/serialize.ts): the bytes JSON.stringify gives.
  return planJsonCompact(await a.plan(r.candidates, r.budget, r.options));
}

port.on('message', (msg: PlanThreadRequest) => {
  if (msg.kind === 'close') {
    void (opening ?? Promise.resolve(undefined))
      .then((a) => a?.close(), () => undefined)
      .finally(() => port.postMessage({ kind: 'closed' } satisfies PlanThreadReply));
    return;
  }
  const { id } = msg;
  plan(msg.body).then(
    (text) => port.postMessage({ kind: 'plan', id, text } satisfies PlanThreadReply),
    (error: unknown) => {
      const reply: PlanThreadReply = error instanceof RolloutBudgetError
        ? { kind: 'error', id, code: error.code, message: error.message, exitCode: error.exitCode, fields: error.fields, retryable: error.retryable }
        : { kind: 'internal', id, message: (error as Error)?.message ?? String(error), stack: (error as Error)?.stack ?? String(error) };
      port.postMessage(reply);
    },
  );
});
