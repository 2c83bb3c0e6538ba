import { writeFileSync } from 'node:fs';
import { createServer, connect, type Server, type Socket } from 'node:net';
import { join } from 'node:path';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { PostgresStore, RolloutBudgetError } from '../src/index.js';
import { cli } from './cli-helpers.js';
import { call, dropPgSchema, freshPgUrl, pgUrl, startService, stopService } from './service-helpers.js';
import { tempDir } from './temp.js';

// The state database going away under a running service (PostgreSQL stopped or restarted, a
// network cut, an administrator ending connections): the service answered 500 INTERNAL and
// logged a stack trace for every request. The real PostgreSQL of the tests sits behind a real
// TCP relay that the test cuts and restores, since stopping the shared server would stop the
// other test files' too; connections are also ended by the server itself (pg_terminate_backend).

/** A TCP relay to host:port that can be cut (refusing and resetting) and restored on its port. */
class Relay {
  private server: Server | undefined;
  private readonly sockets = new Set<Socket>();
  /** The relay's own connections to PostgreSQL, by their local port (pg_stat_activity.client_port). */
  readonly upstreamPorts = new Set<number>();
  port = 0;

  constructor(private readonly host: string, private readonly target: number) {}

  async open(): Promise<void> {
    const server = createServer((client) => {
      const upstream = connect(this.target, this.host);
      upstream.on('connect', () => this.upstreamPorts.add(upstream.localPort!));
      for (const s of [client, upstream]) {
        this.sockets.add(s);
        s.on('close', () => this.sockets.delete(s));
        s.on('error', () => undefined);
      }
      client.pipe(upstream).pipe(client);
      client.on('close', () => upstream.destroy());
      upstream.on('close', () => client.destroy());
    });
    await new Promise<void>((resolve) => server.listen(this.port, '127.0.0.1', resolve));
    this.port = (server.address() as { port: number }).port;
    this.server = server;
  }

  /** Stops listening (new connections are refused) and resets every open one. */
  async cut(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    for (const s of this.sockets) s.resetAndDestroy();
    if (server !== undefined) await new Promise((resolve) => server.close(resolve));
  }
}

const base = pgUrl();

/** A service on a fresh schema of the test PostgreSQL, reached through a Relay the test can cut. */
async function serviceBehindRelay(): Promise<{ relay: Relay; direct: string; child: Awaited<ReturnType<typeof startService>> }> {
  const u = new URL(base!);
  const relay = new Relay(u.hostname, Number(u.port || 5432));
  await relay.open();
  const direct = freshPgUrl(base!);
  const via = new URL(direct);
  via.port = String(relay.port);
  return { relay, direct, child: await startService(['--state', via.toString()]) };
}

/** Ends (as PostgreSQL's administrator) the server connections the relay carries; how many. */
async function endRelayed(admin: pg.Client, relay: Relay): Promise<number> {
  return (await admin.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE client_port = ANY($1)', [[...relay.upstreamPorts]])).rowCount ?? 0;
}

describe.skipIf(base === undefined)('a PostgreSQL state that goes away under a running service', () => {
  it('answers 503 STATE_ERROR with one log line (no 500, no stack) while it is gone, and serves again when it is back', async () => {
    const { relay, direct, child } = await serviceBehindRelay();
    const plan = { candidates: [{ id: 'a' }, { id: 'b' }], budget: { rollouts: 8 } };
    const results = (step: number) => [{ prompt_id: 'a', step, rewards: [1, 0] }];
    try {
      expect((await call(child.port, 'POST', '/v1/plan', plan)).status).toBe(200);
      expect((await call(child.port, 'POST', '/v1/observe', results(0))).json).toMatchObject({ applied: 2 });

      await relay.cut();
      const down = [
        await call(child.port, 'POST', '/v1/plan', plan),
        await call(child.port, 'POST', '/v1/observe', results(1)),
        await call(child.port, 'GET', '/healthz'),
        await call(child.port, 'GET', '/v1/prompts/a'),
      ];
      for (const r of down) {
        expect(r.status, r.text).toBe(503);
        expect(r.json.error.code).toBe('STATE_ERROR');
        expect(r.json.error.retryable).toBe(true); // the same request may work sent again
        expect(r.headers.get('retry-after')).toBe('1');
        expect(r.json.error.message).toMatch(/^the state database cannot be reached \(connect ECONNREFUSED 127\.0\.0\.1:\d+\); retry when it is back \(re-sending an observe is safe: it is applied once\)$/);
      }
      expect(child.stderr()).not.toContain('internal error');
      expect(child.stderr()).not.toMatch(/^\s+at /m);
      expect(child.stderr().match(/the state database cannot be reached/g)?.length).toBe(4);

      await relay.open(); // the same port again
      expect((await call(child.port, 'POST', '/v1/plan', plan)).status).toBe(200);
      expect((await call(child.port, 'POST', '/v1/observe', results(1))).json).toMatchObject({ applied: 2 });
      expect((await call(child.port, 'GET', '/healthz')).json).toMatchObject({ status: 'ok', prompts: 1 });

      // PostgreSQL itself ends the service's connections (57P01, as a restart does): a request
      // may find its connection gone (503) but never fails as a bug, and the next is served.
      const admin = new pg.Client({ connectionString: base });
      await admin.connect();
      try {
        expect(await endRelayed(admin, relay)).toBeGreaterThan(0);
      } finally {
        await admin.end();
      }
      for (let k = 0; k < 3; k++) expect([200, 503]).toContain((await call(child.port, 'POST', '/v1/plan', plan)).status);
      expect((await call(child.port, 'POST', '/v1/plan', plan)).status).toBe(200);
      expect((await call(child.port, 'GET', '/v1/prompts/a')).json).toMatchObject({ rollouts: 4 });
      expect(child.stderr()).not.toContain('internal error');
      const metrics = (await call(child.port, 'GET', '/metrics')).text;
      expect(metrics).toMatch(/^rollout_budget_errors_total\{status="503",code="STATE_ERROR"\} \d+$/m);
      expect(metrics).not.toContain('code="INTERNAL"');
    } finally {
      expect((await stopService(child)).code).toBe(0);
      await relay.cut();
      await dropPgSchema(base!, direct);
    }
  }, 60_000);

  it('a planning thread that cannot open its store while the database is gone answers a retryable 503 (with Retry-After), as an observe does', async () => {
    // A thread opens its own store on its first plan (and after a plan stopped at its deadline):
    // its open failure was a 503 without "retryable", so the Python clients gave up at once on a
    // restart they ride out for an observe.
    const { relay, direct, child } = await serviceBehindRelay();
    try {
      await relay.cut(); // before the first plan: the thread's store is not open yet
      const r = await call(child.port, 'POST', '/v1/plan', { candidates: [{ id: 'a' }], budget: { rollouts: 4 } });
      expect(r.status, r.text).toBe(503);
      expect(r.json.error).toMatchObject({ code: 'STATE_ERROR', retryable: true });
      expect(r.json.error.message).toMatch(/cannot open the state database \(connect ECONNREFUSED /);
      expect(r.headers.get('retry-after')).toBe('1');
      await relay.open();
      expect((await call(child.port, 'POST', '/v1/plan', { candidates: [{ id: 'a' }], budget: { rollouts: 4 } })).status).toBe(200);
    } finally {
      expect((await stopService(child)).code).toBe(0);
      await relay.cut();
      await dropPgSchema(base!, direct);
    }
  }, 60_000);

  it('keeps serving when PostgreSQL ends its connections while requests are in flight (a restart or failover under load)', async () => {
    // Found under 16 clients: pg-pool takes its 'error' listener off a client it hands out, so a
    // connection the server dropped during a transaction emitted an 'error' nobody heard and the
    // service exited 1 ("Unhandled 'error' event ... terminating connection due to administrator command").
    const { relay, direct, child } = await serviceBehindRelay();
    const admin = new pg.Client({ connectionString: base });
    await admin.connect();
    try {
      const observe = (k: number) => Array.from({ length: 2000 }, (_, i) => ({ prompt_id: `z${k}-${i}`, step: 0, rewards: [1, 0, 0, 1, 1, 0, 1, 0] }));
      const sent = Array.from({ length: 8 }, (_, k) => call(child.port, 'POST', '/v1/observe', observe(k)));
      let ended = 0;
      for (let round = 0; round < 12; round++) {
        await new Promise((resolve) => setTimeout(resolve, 25));
        ended += await endRelayed(admin, relay);
      }
      const answers = await Promise.all(sent);
      expect(ended).toBeGreaterThan(0);
      for (const r of answers) {
        expect([200, 503], r.text).toContain(r.status);
        if (r.status === 503) expect(r.json.error).toMatchObject({ code: 'STATE_ERROR', retryable: true });
      }
      expect(child.proc.exitCode).toBeNull();
      // Served again; each observe was applied whole or not at all.
      expect((await call(child.port, 'GET', '/healthz')).status).toBe(200);
      const applied = answers.filter((r) => r.status === 200).length;
      expect((await call(child.port, 'GET', '/healthz')).json.prompts).toBe(2000 * applied);
    } finally {
      await admin.end();
      expect((await stopService(child)).code).toBe(0);
      await relay.cut();
      await dropPgSchema(base!, direct);
    }
  }, 60_000);

  it('a request that waited 10 s for one of the pool\'s connections, all busy, says so, not that the database is gone', async () => {
    // Found under 40 concurrent large observes: PostgreSQL was up, and 15 answers said "the state
    // database cannot be reached (timeout exceeded when trying to connect)".
    const direct = freshPgUrl(base!);
    const store = await PostgresStore.connect(direct, { maxConnections: 1 });
    const admin = new pg.Client({ connectionString: base });
    await admin.connect();
    try {
      const schema = new URL(direct).searchParams.get('schema')!;
      await admin.query('BEGIN');
      await admin.query(`LOCK TABLE "${schema}".meta IN ACCESS EXCLUSIVE MODE`);
      const holding = store.lastStep(); // waits on the lock, holding the pool's one connection
      const started = Date.now();
      const waiting = await store.get('a').then(() => undefined, (error: unknown) => error);
      expect(Date.now() - started).toBeGreaterThanOrEqual(9_000);
      expect(waiting).toBeInstanceOf(RolloutBudgetError);
      expect((waiting as RolloutBudgetError).code).toBe('STATE_ERROR');
      expect((waiting as RolloutBudgetError).retryable).toBe(true);
      expect((waiting as Error).message).toMatch(/^all 1 of this process's connections to the state database were busy for 10 s \(0 more requests waiting\): too many large requests at once/);
      await admin.query('COMMIT');
      await holding;
      expect(await store.get('a')).toBeUndefined(); // served again
    } finally {
      await admin.query('ROLLBACK').catch(() => undefined);
      await admin.end();
      await store.close();
      await dropPgSchema(base!, direct);
    }
  }, 30_000);

  it('a CLI command whose state cannot be reached exits 2 with one line naming it', async () => {
    const relay = new Relay('127.0.0.1', 1); // opened and cut: its port refuses
    await relay.open();
    await relay.cut();
    const via = new URL(freshPgUrl(base!));
    via.port = String(relay.port);
    const prompts = join(tempDir('rb-pg-outage-'), 'p.jsonl');
    writeFileSync(prompts, '{"id":"a"}\n');
    const run = await cli(['plan', '--prompts', prompts, '--state', via.toString(), '--budget-rollouts', '8']);
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/^rollout-budget: postgres:\/\/.*: cannot open the state database \(connect ECONNREFUSED 127\.0\.0\.1:\d+\)\n$/);
  });
});
