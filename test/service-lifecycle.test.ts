import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createServer } from 'node:net';
import { describe, expect, it } from 'vitest';
import { Allocator, openAsyncStore } from '../src/index.js';
import { CLI, call, freshPgUrl, pgUrl, request, runServe, sleep, startService, stateFiles, stdioSession, stopService } from './service-helpers.js';

// Regression tests for issue 12 (items 2 and 9), each named after what broke: how the service
// stops and starts. A path of "//" killed the stdio service, SIGTERM waited for a lock another
// process held, and a --host or port it cannot listen on printed two lines or left its state file.
const db = stateFiles('rb-hard-');
const PG = pgUrl();

describe('item 2: a path of "//" killed the stdio service and leaked the HTTP in-flight counter', () => {
  it('stdio: "//" is a 404 and the requests after it are answered', async () => {
    const lines = [{ id: 1, path: '//' }, { id: 2, path: '//host/v1/prompts/x' }, { id: 3, path: '/healthz' }].map((l) => JSON.stringify(l)).join('\n');
    const { code, replies } = await stdioSession(['--state', db()], `${lines}\n`);
    expect(replies.map((r) => [r.id, r.status])).toEqual([[1, 404], [2, 404], [3, 200]]);
    expect(code).toBe(0);
  }, 60_000);

  it('SIGTERM while an observe waits for another process\'s write lock: cut at the grace, not applied, exit 0 then (not when the lock frees)', async () => {
    // The process stayed up until the lock freed (up to ROLLOUT_BUDGET_LOCK_TIMEOUT_S, 300 s by
    // default), then applied the batch whose client had been cut (a review: exit 38 s after SIGTERM).
    const state = db();
    const child = await startService(['--state', state, '--plan-timeout-s', '1'], 15_000, { ROLLOUT_BUDGET_LOCK_TIMEOUT_S: '120' });
    const { Database } = await import('./sqlite.js');
    const other = new Database(state);
    try {
      other.exec('BEGIN IMMEDIATE'); // another process's writer holds the lock
      await stopWhileLocked(child, ['/v1/observe']);
      expect(child.stderr()).toContain('store closed');
    } finally {
      if (other.inTransaction) other.exec('ROLLBACK');
      other.close();
      await stopService(child, 1_000);
    }
    await notApplied(state);
  }, 90_000);

  it.skipIf(PG === undefined)('SIGTERM while an observe waits for a PostgreSQL lock another session holds: its statement is cancelled at the grace, nothing applied, exit 0', async () => {
    // The process stayed up as long as the lock was held (no lock_timeout), then applied the
    // batch whose client had been cut (a review: still running 20 s after SIGTERM).
    const state = freshPgUrl(PG!);
    const schema = new URL(state).searchParams.get('schema')!;
    const child = await startService(['--state', state, '--plan-timeout-s', '1']);
    const pg = (await import('pg')).default;
    const other = new pg.Client({ connectionString: PG! });
    await other.connect();
    try {
      await other.query('BEGIN');
      await other.query(`LOCK TABLE "${schema}".prompts IN ACCESS EXCLUSIVE MODE`);
      await other.query(`LOCK TABLE "${schema}".pooled IN ACCESS EXCLUSIVE MODE`);
      // A read outside a transaction blocks too (its count, behind the lock): it ends as well.
      await stopWhileLocked(child, ['/v1/observe', '/healthz']);
      expect(child.stderr()).toContain('the service is stopping: its statement was cancelled');
    } finally {
      await other.query('ROLLBACK').catch(() => undefined);
      await other.end();
      await stopService(child, 1_000);
    }
    await notApplied(state);
  }, 90_000);

  it('HTTP: "//" is a 404, not a 500; SIGTERM afterwards closes the store and exits 0', async () => {
    const child = await startService(['--state', db()]);
    try {
      const r = await request(child.port, 'GET', '//');
      expect(r.status).toBe(404);
      // a path is a path: "//x/v1/plan" is not routed as /v1/plan
      expect((await request(child.port, 'POST', '//x/v1/plan', { 'content-type': 'application/json' }, '{}')).status).toBe(404);
      expect((await call(child.port, 'GET', '/healthz')).status).toBe(200);
    } catch (error) {
      await stopService(child, 1_000);
      throw error;
    }
    const exit = await stopService(child);
    expect(exit.code).toBe(0);
    expect(child.stderr()).toContain('store closed');
    expect(child.stderr()).not.toContain('internal error');
  }, 60_000);
});

/**
 * Sends requests a lock holds (an observe of prompt "late", `/healthz`), then SIGTERM 0.5 s
 * later: the service (started with --plan-timeout-s 1) exits 0 within its grace, 1 s + 2 s, not
 * when the lock frees, and every request was cut.
 */
async function stopWhileLocked(child: Awaited<ReturnType<typeof startService>>, paths: readonly ('/v1/observe' | '/healthz')[]): Promise<void> {
  const sent = paths.map((path) => (path === '/healthz' ? call(child.port, 'GET', path) : call(child.port, 'POST', path, [{ prompt_id: 'late', step: 0, reward: 1, rollout_id: 'late#0' }]))
    .then((r) => `${path} answered ${r.status}`, (error: Error) => `cut: ${error.message}`));
  await sleep(500);
  const signalled = performance.now();
  const exit = await stopService(child, 60_000);
  const seconds = (performance.now() - signalled) / 1000;
  expect(exit.code).toBe(0);
  expect(seconds, `exited ${seconds.toFixed(1)} s after SIGTERM`).toBeLessThan(10);
  for (const answer of await Promise.all(sent)) expect(answer).toMatch(/^cut: /);
}

/** The observe stopWhileLocked sent was not applied. */
async function notApplied(state: string): Promise<void> {
  const store = await openAsyncStore(state);
  try {
    expect(await store.get('late')).toBeUndefined();
  } finally {
    await store.close();
  }
}

describe('item 9: invalid UTF-8 became U+FFFD silently; a bad --host printed two lines', () => {
  it('a bad --host prints one line, not "store closed" first', async () => {
    const state = db();
    const r = await runServe(['--host', '300.1.1.1', '--port', '0', '--token', 't', '--state', state], 20_000);
    expect(r.code).toBe(2);
    expect(r.stderr.trim().split('\n')).toEqual([expect.stringContaining('cannot listen on 300.1.1.1:0')]);
    expect(['', '-wal', '-shm'].filter((s) => existsSync(`${state}${s}`))).toEqual([]); // the state file it made is gone
  }, 60_000);

  it('--host ::1: the "listening on" line is a URL a client can use (http://[::1]:PORT, not http://::1:PORT)', async (ctx) => {
    const probe = createServer();
    const ipv6 = await new Promise<boolean>((resolve) => {
      probe.once('error', () => resolve(false));
      probe.listen(0, '::1', () => probe.close(() => resolve(true)));
    });
    if (!ipv6) ctx.skip(); // a machine without IPv6 loopback
    const child = spawn(process.execPath, [CLI, 'serve', '--host', '::1', '--port', '0', '--state', db()], { stdio: ['ignore', 'ignore', 'pipe'] });
    try {
      let err = '';
      const url = await new Promise<string>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no "listening on" line: ${err}`)), 20_000);
        child.stderr.on('data', (chunk: Buffer) => {
          err += chunk.toString();
          const m = /listening on (\S+)/.exec(err);
          if (m) {
            clearTimeout(timer);
            resolve(m[1]!);
          }
        });
      });
      expect(url).toMatch(/^http:\/\/\[::1\]:\d+$/);
      const health = await fetch(`${url}/healthz`);
      expect(health.status).toBe(200);
      expect(await health.json()).toMatchObject({ status: 'ok' });
    } finally {
      child.kill('SIGTERM');
      await new Promise((resolve) => child.once('exit', resolve));
    }
  }, 60_000);

  it('a port in use: one line, exit 2; a state file it made is removed, one that was there is kept', async () => {
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    const port = (taken.address() as { port: number }).port;
    try {
      const fresh = db();
      const r = await runServe(['--port', String(port), '--state', fresh], 20_000);
      expect(r.code).toBe(2);
      expect(r.stderr.trim().split('\n')).toEqual([`rollout-budget: cannot listen on 127.0.0.1:${port} (EADDRINUSE)`]);
      expect(['', '-wal', '-shm'].filter((s) => existsSync(`${fresh}${s}`))).toEqual([]);
      const kept = db();
      const allocator = new Allocator({ state: kept });
      allocator.observe([{ prompt_id: 'a', reward: 1 }]);
      allocator.close();
      expect((await runServe(['--port', String(port), '--state', kept], 20_000)).code).toBe(2);
      const again = new Allocator({ state: kept });
      expect(again.posterior('a').rollouts).toBe(1);
      again.close();
    } finally {
      await new Promise((resolve) => taken.close(resolve));
    }
  }, 60_000);
});
