import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { RolloutBudgetError } from '../errors.js';
import type { PlanRunner, PlanThreadInit, PlanThreadReply, PlanThreadRequest } from './plan-runner.js';

export interface PlanWorkersOptions extends PlanThreadInit {
  /** Longest a plan request may take, from arrival to answer (waiting for a thread included), in ms. */
  readonly timeoutMs: number;
  /** Planning threads, each with its own store connection; default 1. */
  readonly threads?: number;
  readonly log?: (line: string) => void;
}

interface Job {
  readonly id: number;
  readonly body: string;
  readonly resolve: (text: string) => void;
  readonly reject: (error: unknown) => void;
  timer?: NodeJS.Timeout;
  slot?: Slot;
}

interface Slot {
  readonly worker: Worker;
  job?: Job;
  /** Terminated on purpose (deadline, crash, close): its exit is expected. */
  retired?: boolean;
}

/**
 * The compiled thread body next to this file; from the TypeScript sources (tests), the one
 * `npm run build` wrote under dist/.
 */
function threadEntry(): URL {
  const here = new URL('./plan-thread.js', import.meta.url);
  if (existsSync(fileURLToPath(here))) return here;
  const built = new URL('../../dist/src/service/plan-thread.js', import.meta.url);
  if (existsSync(fileURLToPath(built))) return built;
  throw new RolloutBudgetError('IO_ERROR', `${fileURLToPath(here)}: the planning thread is missing (run npm run build)`);
}

/** A plan request whose client went away before its plan started. */
const clientGone = () => new RolloutBudgetError('INTERRUPTED', 'plan: the client closed the request before its plan started: not planned');

/**
 * Plans in worker threads so that the service's event loop stays free (health checks,
 * observes, SIGTERM) while a large plan runs, and with a deadline: a request not answered
 * within `timeoutMs` of its arrival gets PLAN_TIMEOUT (HTTP 503); if its plan is running, the
 * thread is terminated (the only way to stop synchronous code) and a fresh one takes its
 * place. A plan writes only its candidates' group and hint where the state has none (never
 * evidence; store/meta.ts), so one stopped, or answered 503 once its deadline passed, may have
 * recorded them: what the request's retry records anyway. Requests wait for a free
 * thread smallest first (next()), so one client's large plans do not hold back another's small ones. Each thread opens its own store connection (SQLite: a
 * second connection to the file, WAL; PostgreSQL: its own pool), so only the request text and
 * the plan text cross threads.
 */
export class PlanWorkers implements PlanRunner {
  private readonly slots: Slot[] = [];
  private readonly queue: Job[] = [];
  private nextId = 1;
  private closing = false;

  constructor(private readonly options: PlanWorkersOptions) {
    const threads = options.threads ?? 1;
    if (!Number.isSafeInteger(threads) || threads < 1) throw new RolloutBudgetError('BAD_OPTION', `plan threads must be an integer ≥ 1, got ${threads}`);
    if (!(options.timeoutMs > 0)) throw new RolloutBudgetError('BAD_OPTION', `plan timeout must be > 0 ms, got ${options.timeoutMs}`);
    for (let k = 0; k < threads; k++) this.slots.push(this.spawn());
  }

  /**
   * A request whose client went away (`signal`) while it waited for a thread leaves the queue
   * unplanned: a trainer that timed out and sent its request again would otherwise have every
   * copy planned in turn, each later request waiting behind them. One already running finishes.
   */
  plan(body: string, signal?: AbortSignal, arrivedMs?: number): Promise<string> {
    if (this.closing) return Promise.reject(new RolloutBudgetError('STATE_ERROR', 'the service is stopping: plan not started'));
    if (signal?.aborted === true) return Promise.reject(clientGone());
    // From the request's arrival: the time its body took to come and be checked counts (a plan
    // with a 3.3 s limit was answered after 4.85 s, the event loop busy with an observe). One
    // past its deadline already is not sent to a thread (ending that thread would cost its start).
    const spent = arrivedMs === undefined ? 0 : Math.max(0, performance.now() - arrivedMs);
    if (spent >= this.options.timeoutMs) {
      return Promise.reject(new RolloutBudgetError('PLAN_TIMEOUT', `plan: not started: ${(spent / 1000).toFixed(1)} s had passed since the request arrived (its body coming and being checked, the service busy), past the limit of ${this.options.timeoutMs / 1000} s (--plan-timeout-s); send it again, or raise the limit`));
    }
    return new Promise<string>((resolve, reject) => {
      const job: Job = { id: this.nextId++, body, resolve, reject };
      job.timer = setTimeout(() => this.expire(job), Math.max(0, this.options.timeoutMs - spent));
      signal?.addEventListener('abort', () => {
        const k = job.slot === undefined ? this.queue.indexOf(job) : -1;
        if (k < 0) return;
        this.queue.splice(k, 1);
        this.settle(job, undefined, clientGone());
      }, { once: true });
      this.queue.push(job);
      this.pump();
    });
  }

  async close(): Promise<void> {
    this.closing = true;
    for (const job of this.queue.splice(0)) this.settle(job, undefined, new RolloutBudgetError('STATE_ERROR', 'the service is stopping: plan not started'));
    await Promise.all(this.slots.map((slot) => this.stop(slot)));
    this.slots.length = 0;
  }

  /** Asks a thread to close its store, then ends it (at once when it is busy or silent). */
  private async stop(slot: Slot): Promise<void> {
    slot.retired = true;
    if (slot.job === undefined) {
      const closed = new Promise<void>((resolve) => {
        slot.worker.on('message', (m: PlanThreadReply) => m.kind === 'closed' && resolve());
        slot.worker.once('exit', () => resolve());
      });
      slot.worker.postMessage({ kind: 'close' } satisfies PlanThreadRequest);
      await Promise.race([closed, new Promise((r) => setTimeout(r, 5_000).unref())]);
    }
    await slot.worker.terminate();
  }

  private spawn(): Slot {
    const init: PlanThreadInit = { state: this.options.state, defaults: this.options.defaults, ...(this.options.file === undefined ? {} : { file: this.options.file }) };
    const slot: Slot = { worker: new Worker(threadEntry(), { workerData: init }) };
    slot.worker.unref(); // a forgotten close() never keeps the process alive
    slot.worker.on('message', (reply: PlanThreadReply) => this.onReply(slot, reply));
    slot.worker.on('error', (error) => this.onCrash(slot, error));
    slot.worker.on('exit', (code) => this.onCrash(slot, new Error(`the planning thread exited with code ${code}`)));
    return slot;
  }

  /**
   * Takes the earliest queued job of the smallest size class (a plan's cost grows with its
   * candidates; a class is a power of 2 of body bytes). In arrival order, a trainer's
   * 16-candidate plan waited behind another client's 8 queued plans of 250,000 candidates:
   * 9.5 s, at its 10 s deadline. Now it waits for at most the plans running; large plans wait
   * while much smaller ones are queued, up to their own deadline (PLAN_TIMEOUT). Plans within a
   * factor of 2 keep their arrival order: ordered by exact size, 16 clients' plans of 256
   * candidates, a few bytes apart, had their p99 go from 53 to 160 ms (the longest bodies waited
   * behind the shorter ones). O(queue).
   */
  private next(): Job | undefined {
    let best = -1;
    let bestClass = Infinity;
    for (let k = 0; k < this.queue.length; k++) {
      const size = Math.floor(Math.log2(this.queue[k]!.body.length + 1));
      if (size < bestClass) {
        best = k;
        bestClass = size;
      }
    }
    return best < 0 ? undefined : this.queue.splice(best, 1)[0];
  }

  private pump(): void {
    for (const slot of this.slots) {
      if (slot.job !== undefined || slot.retired === true) continue;
      const job = this.next();
      if (job === undefined) return;
      slot.job = job;
      job.slot = slot;
      slot.worker.postMessage({ kind: 'plan', id: job.id, body: job.body } satisfies PlanThreadRequest);
    }
  }

  private settle(job: Job, text: string | undefined, error?: unknown): void {
    clearTimeout(job.timer);
    if (job.slot !== undefined) job.slot.job = undefined;
    job.slot = undefined;
    if (error === undefined) job.resolve(text!);
    else job.reject(error);
  }

  private onReply(slot: Slot, reply: PlanThreadReply): void {
    const job = slot.job;
    if (reply.kind === 'closed' || job === undefined || reply.id !== job.id) return;
    if (reply.kind === 'plan') this.settle(job, reply.text);
    else if (reply.kind === 'error') {
      const error = new RolloutBudgetError(reply.code as RolloutBudgetError['code'], reply.message, reply.exitCode, reply.fields);
      error.retryable = reply.retryable;
      this.settle(job, undefined, error);
    }
    else {
      const error = new Error(reply.message);
      error.stack = reply.stack;
      this.settle(job, undefined, error);
    }
    this.pump();
  }

  /** A thread that died on its own (an uncaught error, out of memory): its plan fails, a new thread takes its place. */
  private onCrash(slot: Slot, error: Error): void {
    if (slot.retired === true) return;
    const job = slot.job;
    this.options.log?.(`planning thread failed (${error.message}); starting a new one`);
    this.replace(slot);
    if (job !== undefined) this.settle(job, undefined, error);
  }

  /** The deadline passed: a queued request leaves the queue, a running plan's thread is ended. */
  private expire(job: Job): void {
    const seconds = this.options.timeoutMs / 1000;
    const error = new RolloutBudgetError(
      'PLAN_TIMEOUT',
      `plan: not done within the limit of ${seconds} s (--plan-timeout-s) and stopped; ` +
        'fewer candidates or a smaller max_n plan faster, or raise the limit',
    );
    const slot = job.slot;
    if (slot === undefined) {
      const k = this.queue.indexOf(job);
      if (k >= 0) this.queue.splice(k, 1);
    } else this.replace(slot);
    this.settle(job, undefined, error);
  }

  private replace(slot: Slot): void {
    slot.retired = true;
    void slot.worker.terminate();
    const k = this.slots.indexOf(slot);
    if (k >= 0) {
      if (this.closing) this.slots.splice(k, 1);
      else this.slots[k] = this.spawn();
    }
    queueMicrotask(() => this.pump());
  }
}
