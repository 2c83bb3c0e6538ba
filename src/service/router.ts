import { planJsonCompact } from '../plan/serialize.js';
import { RolloutBudgetError, quote } from '../errors.js';
import type { AsyncAllocator } from './async-allocator.js';
import { ServiceMetrics } from './metrics.js';
import type { PlanRunner } from './plan-runner.js';
import { checkNames, errorBody, observeRequestOf, planRequestOf, promptIdOf, promptQueryOf } from './requests.js';

/** One request, transport-free: HTTP and stdio both end here. */
export interface ServiceRequest {
  readonly method: string;
  /** Path with an optional query string, e.g. `/v1/prompts/p1?group=math`. */
  readonly path: string;
  readonly body: string;
  /** Aborted when the client went away (HTTP): a plan still waiting for a planning thread is not started. */
  readonly signal?: AbortSignal;
  /**
   * When the request arrived (performance.now(), HTTP: its head), from which a plan's deadline
   * counts; else from when the plan is handed to its runner.
   */
  readonly arrivedMs?: number;
}

export interface ServiceResponse {
  readonly status: number;
  readonly contentType: string;
  /** JSON text (or Prometheus text for /metrics). */
  readonly body: string;
  /** Extra HTTP headers (e.g. WWW-Authenticate on 401). */
  readonly headers?: Readonly<Record<string, string>>;
}

const json = (status: number, value: unknown): ServiceResponse => ({
  status,
  contentType: 'application/json',
  body: JSON.stringify(value),
});

/**
 * HTTP status of a caller mistake: 422 when the budget cannot fit, 503 when the store is down
 * or the plan ran past its deadline, else 400.
 */
export function statusOf(error: RolloutBudgetError): number {
  if (error.code === 'BUDGET_INFEASIBLE') return 422;
  if (error.code === 'STATE_ERROR' || error.code === 'IO_ERROR' || error.code === 'PLAN_TIMEOUT') return 503;
  if (error.code === 'INTERRUPTED') return 499; // the client closed the request (as nginx counts it): never sent
  return 400;
}

/** A request target split into path and query, without URL's host rules (`//x` is a path). */
export interface Target {
  readonly path: string;
  readonly query: URLSearchParams;
}

export function targetOf(raw: string): Target {
  const q = raw.indexOf('?');
  return q < 0 ? { path: raw, query: new URLSearchParams() } : { path: raw.slice(0, q), query: new URLSearchParams(raw.slice(q + 1)) };
}

/**
 * Routes requests to an allocator and keeps the metrics. A request is validated whole before
 * the store is touched, and observe applies in one store transaction, so a rejected request
 * applies nothing.
 */
export class Service {
  readonly metrics = new ServiceMetrics();
  private inFlight = 0;
  private idleWaiters: (() => void)[] = [];

  /**
   * `planner`, when given, plans off this thread with a deadline (plan-worker.ts); without it
   * plans run here, on the allocator, with none.
   */
  constructor(
    readonly allocator: AsyncAllocator,
    private readonly log: (line: string) => void = () => undefined,
    readonly planner?: PlanRunner,
  ) {}

  /** Resolves once no request is being handled. */
  idle(): Promise<void> {
    return this.inFlight === 0 ? Promise.resolve() : new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /** Answers one request; never throws, whatever the request holds. */
  async handle(req: ServiceRequest): Promise<ServiceResponse> {
    this.inFlight++;
    let route = 'other';
    let response: ServiceResponse;
    try {
      const target = targetOf(req.path);
      route = routeName(target.path);
      response = await this.dispatch(req.method, target, req.body, req.signal, req.arrivedMs);
    } catch (error) {
      response = this.fail(error);
    } finally {
      if (--this.inFlight === 0) for (const w of this.idleWaiters.splice(0)) w();
    }
    this.metrics.countRequest(route, response.status);
    return response;
  }

  /** A request the transport refused before reading it (401, 403, 415): counted, never dispatched. */
  refuse(path: string, status: number, code: string, message: string, headers?: Record<string, string>): ServiceResponse {
    this.metrics.countError(status, code);
    this.metrics.countRequest(routeName(targetOf(path).path), status);
    return { ...json(status, { error: { code, message } }), ...(headers === undefined ? {} : { headers }) };
  }

  /** An error answer counted in the metrics (also used by transports, e.g. for 413). */
  fail(error: unknown, status?: number): ServiceResponse {
    if (error instanceof RolloutBudgetError) {
      const s = status ?? statusOf(error);
      this.metrics.countError(s, error.code);
      // A state database that went away (store/unavailable.ts) is not a bug: one line, no stack.
      if (error.code === 'STATE_ERROR') this.log(error.message);
      // A request that may succeed sent again (a state database that went away) says when to.
      return error.retryable ? { ...json(s, errorBody(error)), headers: { 'retry-after': '1' } } : json(s, errorBody(error));
    }
    this.metrics.countError(500, 'INTERNAL');
    this.log(`internal error: ${(error as Error).stack ?? String(error)}`);
    return json(500, { error: { code: 'INTERNAL', message: (error as Error).message ?? String(error) } });
  }

  private async dispatch(method: string, target: Target, body: string, signal?: AbortSignal, arrivedMs?: number): Promise<ServiceResponse> {
    const path = target.path;
    const allow = (m: string) => {
      if (method !== m) throw new MethodError(m);
    };
    try {
      if (path === '/v1/plan') {
        allow('POST');
        const r = planRequestOf(body);
        checkNames(r.options, this.allocator.registries);
        const started = process.hrtime.bigint();
        const text = this.planner === undefined
          ? planJsonCompact(await this.allocator.plan(r.candidates, r.budget, r.options))
          : await this.planner.plan(body, signal, arrivedMs);
        this.metrics.observePlanSeconds(Number(process.hrtime.bigint() - started) / 1e9);
        this.metrics.plansServed++;
        return { status: 200, contentType: 'application/json', body: text };
      }
      if (path === '/v1/observe') {
        allow('POST');
        const r = observeRequestOf(body);
        let summary = await this.allocator.observe(r.batch, r.options);
        // `[]` or `{"results": []}`: said, as `observe` says it of an empty file (a trainer whose step's rollouts were all filtered out before it sent them).
        if (summary.applied + summary.duplicates + summary.aborted === 0) summary = { ...summary, warnings: ['the request holds no results: nothing was applied', ...(summary.warnings ?? [])] };
        this.metrics.observeRequests++;
        this.metrics.observationsApplied += summary.applied;
        this.metrics.observationsDuplicate += summary.duplicates;
        return json(200, summary);
      }
      if (path.startsWith('/v1/prompts/')) {
        allow('GET');
        const id = promptIdOf(path.slice('/v1/prompts/'.length));
        const q = promptQueryOf(target.query);
        return json(200, await this.allocator.posterior(id, q.candidate, q.options));
      }
      if (path === '/healthz') {
        allow('GET');
        return json(200, { status: 'ok', store: this.allocator.store.kind, prompts: await this.allocator.store.count() });
      }
      if (path === '/metrics') {
        allow('GET');
        const tracked = await this.allocator.store.count().catch(() => null);
        return { status: 200, contentType: 'text/plain; version=0.0.4; charset=utf-8', body: this.metrics.render(tracked) };
      }
    } catch (error) {
      if (error instanceof MethodError) {
        this.metrics.countError(405, 'METHOD_NOT_ALLOWED');
        return json(405, { error: { code: 'METHOD_NOT_ALLOWED', message: `${quote(path)} takes ${error.allowed}, got ${quote(method)}` } });
      }
      throw error;
    }
    this.metrics.countError(404, 'NOT_FOUND');
    return json(404, { error: { code: 'NOT_FOUND', message: `no route ${quote(method)} ${quote(path)}; routes: POST /v1/plan, POST /v1/observe, GET /v1/prompts/{id}, GET /healthz, GET /metrics` } });
  }
}

class MethodError extends Error {
  constructor(readonly allowed: string) {
    super(allowed);
  }
}

function routeName(path: string): string {
  if (path.startsWith('/v1/prompts/')) return '/v1/prompts/{id}';
  return ['/v1/plan', '/v1/observe', '/healthz', '/metrics'].includes(path) ? path : 'other';
}
