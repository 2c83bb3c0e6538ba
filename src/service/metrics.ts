/**
 * The service's counters in Prometheus text exposition format (version 0.0.4), kept by hand:
 * a few counters and one histogram do not need a client library.
 */
export const PLAN_SECONDS_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5] as const;

export class ServiceMetrics {
  plansServed = 0;
  observeRequests = 0;
  observationsApplied = 0;
  observationsDuplicate = 0;
  private readonly planBuckets = new Array<number>(PLAN_SECONDS_BUCKETS.length).fill(0);
  private planCount = 0;
  private planSum = 0;
  /** Errors by HTTP status and error code. */
  private readonly errors = new Map<string, number>();
  /** Requests by route and status. */
  private readonly requests = new Map<string, number>();

  observePlanSeconds(seconds: number): void {
    this.planCount++;
    this.planSum += seconds;
    PLAN_SECONDS_BUCKETS.forEach((le, i) => {
      if (seconds <= le) this.planBuckets[i]!++;
    });
  }

  countRequest(route: string, status: number): void {
    const key = `route="${route}",status="${status}"`;
    this.requests.set(key, (this.requests.get(key) ?? 0) + 1);
  }

  countError(status: number, code: string): void {
    const key = `status="${status}",code="${code}"`;
    this.errors.set(key, (this.errors.get(key) ?? 0) + 1);
  }

  /** The exposition text; `promptsTracked` is read from the store at scrape time. */
  render(promptsTracked: number | null): string {
    const lines: string[] = [];
    const metric = (name: string, type: string, help: string, samples: [string, number][]) => {
      lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`);
      for (const [labels, v] of samples) lines.push(`${name}${labels} ${v}`);
    };
    metric('rollout_budget_plans_total', 'counter', 'Plans served.', [['', this.plansServed]]);
    metric('rollout_budget_plan_seconds', 'histogram', 'Time to plan one request (store snapshot + planner).', [
      ...PLAN_SECONDS_BUCKETS.map((le, i): [string, number] => [`_bucket{le="${le}"}`, this.planBuckets[i]!]),
      ['_bucket{le="+Inf"}', this.planCount],
      ['_sum', this.planSum],
      ['_count', this.planCount],
    ]);
    metric('rollout_budget_observe_requests_total', 'counter', 'Observe requests applied.', [['', this.observeRequests]]);
    metric('rollout_budget_observations_applied_total', 'counter', 'Rollouts that updated a posterior.', [['', this.observationsApplied]]);
    metric('rollout_budget_observations_duplicate_total', 'counter', 'Rollouts skipped as already applied (same rollout_id).', [['', this.observationsDuplicate]]);
    if (promptsTracked !== null) metric('rollout_budget_prompts_tracked', 'gauge', 'Prompts with state in the store.', [['', promptsTracked]]);
    metric('rollout_budget_errors_total', 'counter', 'Requests answered with an error, by status and code.',
      [...this.errors].map(([k, v]): [string, number] => [`{${k}}`, v]));
    metric('rollout_budget_requests_total', 'counter', 'Requests by route and status.',
      [...this.requests].map(([k, v]): [string, number] => [`{${k}}`, v]));
    return `${lines.join('\n')}\n`;
  }
}
