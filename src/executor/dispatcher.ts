/**
 * Bounded concurrency over several endpoints: at most `concurrency` requests in flight in all;
 * each request goes to the endpoint with the fewest in flight (ties: the lowest index). Waiters
 * are served first come, first served.
 */
export class Dispatcher {
  private readonly inflight: number[];
  private total = 0;
  private readonly waiting: ((endpoint: number) => void)[] = [];

  constructor(
    readonly endpoints: readonly string[],
    readonly concurrency: number,
  ) {
    this.inflight = endpoints.map(() => 0);
  }

  private pick(): number {
    let best = 0;
    for (let i = 1; i < this.inflight.length; i++) if (this.inflight[i]! < this.inflight[best]!) best = i;
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

  /** Requests in flight per endpoint. */
  load(): readonly number[] {
    return [...this.inflight];
  }
}

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
