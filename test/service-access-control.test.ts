import { existsSync } from 'node:fs';
import { gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { call, request, runServe, startService, stateFiles, stopService } from './service-helpers.js';

// Regression tests for issue 12 (item 8: any web page could write the state), each named after
// what broke: the content types a browser sends, a foreign Host or Origin, --token, the flags that
// would expose or exhaust the service; and an HTTP/1.1 request without Host, or with two.
const db = stateFiles('rb-hard-');

describe('item 8: any web page could write the state', () => {
  it('a browser "simple request" (text/plain, form) to /v1/observe is 415 and applies nothing', async () => {
    const child = await startService(['--state', db()]);
    try {
      const body = '[{"prompt_id":"web","step":0,"reward":1}]';
      for (const type of ['text/plain', 'text/plain;charset=UTF-8', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x']) {
        const r = await request(child.port, 'POST', '/v1/observe', { 'content-type': type }, body);
        expect(r.status, type).toBe(415);
        expect(r.json.error.code).toBe('UNSUPPORTED_MEDIA_TYPE');
      }
      expect((await request(child.port, 'POST', '/v1/observe', {}, body)).status).toBe(415);
      expect((await request(child.port, 'POST', '/v1/plan', { 'content-type': 'application/x-ndjson' }, '{}')).status).toBe(415);
      expect((await request(child.port, 'POST', '/v1/observe', { 'content-type': 'application/json; charset=latin1' }, body)).status).toBe(415);
      // A compressed body (real gzip) is 415 naming the encoding, not 400 "not valid UTF-8".
      const gzipped = await request(child.port, 'POST', '/v1/observe', { 'content-type': 'application/json', 'content-encoding': 'gzip' }, gzipSync(body));
      expect(gzipped.status).toBe(415);
      expect(gzipped.json.error).toMatchObject({ code: 'UNSUPPORTED_MEDIA_TYPE', message: 'POST /v1/observe takes an uncompressed body (no Content-Encoding), got Content-Encoding "gzip"' });
      expect(gzipped.headers['accept-encoding']).toBe('identity');
      expect((await call(child.port, 'GET', '/v1/prompts/web')).json.seen).toBe(false);
      // the JSON and NDJSON types are served, and "Content-Encoding: identity" is no encoding
      expect((await request(child.port, 'POST', '/v1/plan', { 'content-type': 'application/json', 'content-encoding': 'identity' }, '{"candidates":[{"id":"a"}],"budget":{"rollouts":8}}')).status).toBe(200);
      expect((await request(child.port, 'POST', '/v1/observe', { 'content-type': 'application/json; charset=utf-8' }, body)).status).toBe(200);
      expect((await request(child.port, 'POST', '/v1/observe', { 'content-type': 'application/x-ndjson' }, '{"prompt_id":"nd","step":0,"reward":1}\n')).status).toBe(200);
    } finally {
      expect((await stopService(child)).code).toBe(0);
    }
  }, 60_000);

  it('a foreign Host (DNS rebinding) or Origin is 403; IP addresses, localhost and --allowed-hosts are served; no CORS headers ever', async () => {
    const child = await startService(['--state', db(), '--allowed-hosts', 'budget.internal']);
    try {
      const json = { 'content-type': 'application/json' };
      const body = '[{"prompt_id":"x","step":0,"reward":1}]';
      const rebound = await request(child.port, 'POST', '/v1/observe', { ...json, host: `attacker.example:${child.port}` }, body);
      expect(rebound.status).toBe(403);
      expect(rebound.json.error.code).toBe('FORBIDDEN_HOST');
      expect((await request(child.port, 'GET', '/v1/prompts/x', { host: 'attacker.example' })).status).toBe(403);
      const cross = await request(child.port, 'POST', '/v1/observe', { ...json, origin: 'http://attacker.example' }, body);
      expect(cross.status).toBe(403);
      expect(cross.json.error.code).toBe('FORBIDDEN_ORIGIN');
      for (const host of [`127.0.0.1:${child.port}`, `localhost:${child.port}`, `[::1]:${child.port}`, 'budget.internal', 'BUDGET.internal.']) {
        expect((await request(child.port, 'GET', '/healthz', { host })).status, host).toBe(200);
      }
      expect((await request(child.port, 'POST', '/v1/observe', { ...json, origin: `http://localhost:${child.port}`, host: `localhost:${child.port}` }, body)).status).toBe(200);
      const preflight = await request(child.port, 'OPTIONS', '/v1/observe', {
        origin: 'http://attacker.example',
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'content-type',
      });
      for (const answer of [rebound, cross, preflight, await request(child.port, 'GET', '/healthz')]) {
        expect(Object.keys(answer.headers).filter((h) => h.startsWith('access-control-'))).toEqual([]);
      }
      expect(preflight.status).toBeGreaterThanOrEqual(400);
    } finally {
      expect((await stopService(child)).code).toBe(0);
    }
  }, 60_000);

  it('--token (or ROLLOUT_BUDGET_TOKEN): 401 without or with a wrong bearer token, served with it; /healthz stays open', async () => {
    for (const [args, env] of [[['--token', 's3cret-token'], undefined], [[], { ROLLOUT_BUDGET_TOKEN: 's3cret-token' }]] as const) {
      const child = await startService(['--state', db(), ...args], 15_000, env);
      try {
        const body = [{ prompt_id: 'auth', step: 0, reward: 1 }];
        const none = await call(child.port, 'POST', '/v1/observe', body);
        expect(none.status).toBe(401);
        expect(none.headers.get('www-authenticate')).toContain('Bearer');
        expect((await call(child.port, 'POST', '/v1/observe', body, { authorization: 'Bearer wrong' })).status).toBe(401);
        expect((await call(child.port, 'GET', '/metrics')).status).toBe(401);
        expect((await call(child.port, 'GET', '/healthz')).status).toBe(200);
        const ok = await call(child.port, 'POST', '/v1/observe', body, { authorization: 'Bearer s3cret-token' });
        expect(ok.status).toBe(200);
        expect(ok.json.applied).toBe(1);
      } finally {
        expect((await stopService(child)).code).toBe(0);
      }
    }
  }, 60_000);

  it('a --host other than loopback needs a token: exit 2 with one line', async () => {
    const r = await runServe(['--host', '0.0.0.0', '--port', '0', '--state', db()], 20_000);
    expect(r.code).toBe(2);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toContain('--host 0.0.0.0 is reachable from other machines: give --token');
  }, 60_000);

  it('--plan-threads above 64 and --body-limit above 2^29 − 24 are exit 2 with one line, and no state file is made (10,000 threads ran out of memory: exit 133, the files left)', async () => {
    const state = db();
    const r = await runServe(['--port', '0', '--state', state, '--plan-threads', '10000'], 20_000);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe('rollout-budget: --plan-threads must be an integer from 1 to 64, got "10000"\n');
    expect(existsSync(state)).toBe(false);
    // A body above 2^29 − 24 bytes could never be read as text: it was a 500 INTERNAL.
    const limit = await runServe(['--port', '0', '--state', state, '--body-limit', '700000000'], 20_000);
    expect(limit.code).toBe(2);
    expect(limit.stderr).toBe('rollout-budget: --body-limit must be an integer from 1 to 536870888, got "700000000"\n');
  }, 60_000);
});

describe('an HTTP/1.1 request without Host, or with two', () => {
  it('gets a JSON 400 naming the header (Node answered 400 with no body, or served two); HTTP/1.0 without Host is served', async () => {
    const { connect } = await import('node:net');
    const raw = (port: number, text: string) =>
      new Promise<string>((resolve, reject) => {
        const socket = connect(port, '127.0.0.1', () => socket.write(text));
        let got = '';
        socket.on('data', (d: Buffer) => (got += d.toString()));
        socket.on('end', () => resolve(got));
        socket.on('error', reject);
      });
    const child = await startService(['--state', ':memory:']);
    try {
      const missing = await raw(child.port, 'GET /healthz HTTP/1.1\r\nConnection: close\r\n\r\n');
      expect(missing).toMatch(/^HTTP\/1\.1 400 Bad Request\r\n/);
      expect(JSON.parse(missing.slice(missing.indexOf('\r\n\r\n') + 4))).toEqual({
        error: { code: 'BAD_REQUEST', message: 'an HTTP/1.1 request needs a Host header (RFC 9112 §3.2): send "Host: 127.0.0.1:<port>", or the name you reach the service by' },
      });
      // Before: two Host lines were served (Node kept the first), which RFC 9112 §3.2 also answers 400.
      const twice = await raw(child.port, 'GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n');
      expect(twice).toMatch(/^HTTP\/1\.1 400 Bad Request\r\n/);
      expect(JSON.parse(twice.slice(twice.indexOf('\r\n\r\n') + 4))).toEqual({ error: { code: 'BAD_REQUEST', message: 'a request has one Host header (RFC 9112 §3.2), got 2' } });
      const old = await raw(child.port, 'GET /healthz HTTP/1.0\r\n\r\n');
      expect(old).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
      expect((await call(child.port, 'GET', '/healthz')).json).toMatchObject({ status: 'ok' });
    } finally {
      await stopService(child);
    }
  }, 60_000);
});
