import { badOption } from '../errors.js';

/**
 * Bounded concurrency over several endpoints: at most `concurrency` requests in flight in all;
 * each request goes to the endpoint with the fewest in flight (ties: the lowest index) among
 * those not resting. Waiters are served first come, first served.
 *
 * An endpoint whose request failed as a server or a connection does (refused, reset, 5xx, a
 * timeout: `failed`) rests: it gets no new request for 1 s, doubling with each failure in a row
 * up to 30 s, while another endpoint does not rest, and an answer (`answered`) ends its rest.
 * Without this, a dead replica among live ones drew every retry (it fails at once, so it always
 * had the fewest in flight) until a group ran out of attempts and the whole run failed.
 */
export class Dispatcher {
  private readonly inflight: number[];
  private total = 0;
  private readonly waiting: ((endpoint: number) => void)[] = [];

  constructor(
    readonly endpoints: readonly string[],
    readonly concurrency: number,
    private readonly now: () => number = Date.now,
    /** Which endpoints rest: a caller's, kept across runs over the same endpoints (EndpointRests). */
    private readonly rests: EndpointRests = new EndpointRests(endpoints.length),
  ) {
    if (rests.count !== endpoints.length) {
      throw badOption(`rests: an EndpointRests of ${rests.count} endpoints for ${endpoints.length} endpoints; make it with new EndpointRests(endpoints.length)`);
    }
    this.inflight = endpoints.map(() => 0);
  }

  private pick(): number {
    const t = this.now();
    const resting = (i: number) => this.rests.resting(i, t);
    const anyAwake = this.inflight.some((_, i) => !resting(i));
    let best = -1;
    for (let i = 0; i < this.inflight.length; i++) {
      if (anyAwake && resting(i)) continue;
      if (best < 0 || this.inflight[i]! < this.inflight[best]!) best = i;
    }
    this.inflight[best]!++;
    this.total++;
    return best;
  }

  /** Waits for a free slot and returns the endpoint index it was given. */
  acquire(): Promise<number> {
    if (this.total < this.concurrency) return Promise.resolve(this.pick());
    return new Promise((resolve) => this.waiting.push(resolve));
  }

  release(endpoint: number): void {
    this.inflight[endpoint]!--;
    this.total--;
    const next = this.waiting.shift();
    if (next !== undefined) next(this.pick());
  }

  /** A request to `endpoint` failed as a server or connection does: it rests (see the class doc). */
  failed(endpoint: number): void {
    this.rests.failed(endpoint, this.now());
  }

  /** `endpoint` answered a request: it rests no more. */
  answered(endpoint: number): void {
    this.rests.answered(endpoint);
  }

  /** Requests in flight per endpoint. */
  load(): readonly number[] {
    return [...this.inflight];
  }
}

/** An endpoint's first rest after a failure, and the longest (dispatcher.ts Dispatcher). */
const REST_MS = 1000;
const MAX_REST_MS = 30_000;

/** Retry policy: attempts after the first, and exponential backoff base·2^(k−1) capped at maxMs. */
export interface RetryPolicy {
  readonly retries: number;
  readonly backoffMs: number;
  readonly maxBackoffMs: number;
}

export const defaultRetry: RetryPolicy = { retries: 4, backoffMs: 200, maxBackoffMs: 5000 };

/** Backoff before retry k (1-based): min(base·2^(k−1), max). */
export function backoff(policy: RetryPolicy, k: number): number {
  return Math.min(policy.backoffMs * 2 ** (k - 1), policy.maxBackoffMs);
}

/**
 * Which of `count` endpoints rest after failures (Dispatcher), and how many failures in a row
 * each had. A run makes its own unless given one: `loop` keeps one for all its rounds and steps,
 * so a replica that failed in one round keeps its rest (and its doubling) in the next instead
 * of drawing the first requests of every round again, and `--server auto` starts with a rest
 * for a replica that did not answer /v1/models.
 */
export class EndpointRests {
  private readonly restUntil: number[];
  private readonly failuresInARow: number[];

  constructor(readonly count: number) {
    this.restUntil = new Array<number>(count).fill(0);
    this.failuresInARow = new Array<number>(count).fill(0);
  }

  /** `endpoint` failed at time `t` (ms): it rests 1 s, doubling with each failure in a row up to 30 s. */
  failed(endpoint: number, t: number): void {
    const k = ++this.failuresInARow[endpoint]!;
    this.restUntil[endpoint] = t + Math.min(REST_MS * 2 ** (k - 1), MAX_REST_MS);
  }

  /** `endpoint` answered: it rests no more. */
  answered(endpoint: number): void {
    this.failuresInARow[endpoint] = 0;
    this.restUntil[endpoint] = 0;
  }

  resting(endpoint: number, t: number): boolean {
    return this.restUntil[endpoint]! > t;
  }
}
