// An endpoint behind TLS (a gateway in front of vLLM: `https://gw.example/vllm/v1`) whose
// certificate Node does not trust: `execute` took the failure for a connection error, retried
// it with backoff in the server detection, then said "start the server" (exit 1); with
// --server given, it retried every request the same way and "gave up after 5 attempts". The
// same for https:// on a server that speaks plain HTTP. Now both end the run at once (exit 2)
// saying what to do. The gateway is node:https forwarding to the sim-server (a TEST DOUBLE for
// vLLM), with a CA and certificate made by openssl for the test.
import { spawn, spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cli } from './cli-helpers.js';
import { SimServer } from '../src/index.js';
import { planOf, simPrompts } from './executor-helpers.js';
import { tempDir } from './temp.js';

const ROOT = join(import.meta.dirname, '..');
const opensslMissing = spawnSync('openssl', ['version']).status !== 0;
if (opensslMissing && process.env.CI === 'true') throw new Error('openssl is missing but CI=true: the TLS endpoint tests need it to make their certificates');

/** A CA and a certificate it signs for 127.0.0.1 and localhost, in `dir`. */
function certificates(dir: string): { ca: string; key: Buffer; cert: Buffer } {
  const openssl = (...args: string[]) => {
    const run = spawnSync('openssl', args, { cwd: dir, encoding: 'utf8' });
    if (run.status !== 0) throw new Error(`openssl ${args.join(' ')}: ${run.stderr}`);
  };
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  openssl('req', '-x509', ...ec, '-keyout', 'ca.key', '-out', 'ca.crt', '-days', '2', '-subj', '/CN=rollout-budget test CA',
    '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign');
  openssl('req', ...ec, '-keyout', 'gw.key', '-out', 'gw.csr', '-subj', '/CN=localhost');
  writeFileSync(join(dir, 'gw.ext'), 'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n');
  openssl('x509', '-req', '-in', 'gw.csr', '-CA', 'ca.crt', '-CAkey', 'ca.key', '-set_serial', '1', '-days', '2', '-out', 'gw.crt', '-extfile', 'gw.ext');
  return { ca: join(dir, 'ca.crt'), key: readFileSync(join(dir, 'gw.key')), cert: readFileSync(join(dir, 'gw.crt')) };
}

/** The bin in a child process, awaited without blocking this one (the servers run here). */
function runBin(args: string[], env: NodeJS.ProcessEnv): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [join(ROOT, 'bin', 'rollout-budget.js'), ...args], { env, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
    child.on('close', (code) => resolve({ code, stderr }));
  });
}

describe.skipIf(opensslMissing)(`an https:// endpoint${opensslMissing ? ' [SKIPPED: no openssl]' : ''}`, () => {
  const dir = tempDir('rb-tls-');
  let gateway: Server;
  let server: SimServer;
  let gatewayUrl = '';
  let simUrl = '';
  let ca = '';
  let connections = 0;
  const prompts = join(dir, 'prompts.jsonl');
  const plan = join(dir, 'plan.json');

  beforeAll(async () => {
    const { candidates, sim } = simPrompts(2);
    writeFileSync(prompts, candidates.map((c) => JSON.stringify(c)).join('\n'));
    writeFileSync(plan, JSON.stringify(planOf({ q0: 2, q1: 2 }, { maxTokens: 256 })));
    server = new SimServer({ prompts: sim });
    simUrl = await server.start();
    const made = certificates(dir);
    ca = made.ca;
    const target = new URL(simUrl);
    // The gateway: TLS here, each request forwarded as it is to the sim-server under /vllm.
    gateway = createServer({ key: made.key, cert: made.cert }, (req, res) => {
      const forward = httpRequest({ host: target.hostname, port: target.port, method: req.method, path: req.url!.replace(/^\/vllm/, ''), headers: req.headers }, (answer) => {
        res.writeHead(answer.statusCode!, answer.headers);
        answer.pipe(res);
      });
      req.pipe(forward);
    });
    gateway.on('connection', () => connections++);
    await new Promise<void>((resolve) => gateway.listen(0, '127.0.0.1', resolve));
    gatewayUrl = `https://127.0.0.1:${(gateway.address() as AddressInfo).port}/vllm/v1`;
  });
  afterAll(async () => {
    gateway.closeAllConnections();
    await new Promise((resolve) => gateway.close(resolve));
    await server.close();
  });

  const execute = (endpoint: string, ...flags: string[]) =>
    ['execute', '--plan', plan, '--prompts', prompts, '--endpoint', endpoint, '--model', 'sim', '--state', join(dir, 'state.db'), '--out', join(dir, 'results.jsonl'), ...flags];

  it('whose certificate Node does not trust: exit 2 at the first try, naming NODE_EXTRA_CA_CERTS (detection and requests)', async () => {
    const untrusted = "UNABLE_TO_VERIFY_LEAF_SIGNATURE (unable to verify the first certificate): the server's TLS certificate is not one this Node trusts: set NODE_EXTRA_CA_CERTS to the file of the CA that signed it";
    connections = 0;
    const detect = await cli(execute(gatewayUrl));
    expect(detect.code).toBe(2);
    expect(detect.stderr).toContain(`--endpoint ${gatewayUrl.replace(/\/v1$/, '')}: cannot send to ${gatewayUrl}/models: ${untrusted}`);
    expect(connections).toBe(1); // not retried
    connections = 0;
    const named = await cli(execute(gatewayUrl, '--server', 'vllm'));
    expect(named.code).toBe(2);
    expect(named.stderr).toContain(`generation failed: cannot send to ${gatewayUrl}/completions: ${untrusted}`);
    expect(named.stderr).not.toContain('gave up after');
    expect(connections).toBeLessThanOrEqual(2); // one a group at most, none retried
  });

  it('trusted through NODE_EXTRA_CA_CERTS: the plan is generated through the gateway', async () => {
    const run = await runBin(execute(gatewayUrl), { ...process.env, NODE_EXTRA_CA_CERTS: ca });
    expect(run.code, run.stderr).toBe(0);
    const results = readFileSync(join(dir, 'results.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { prompt_id: string });
    expect(results.map((r) => r.prompt_id).sort()).toEqual(['q0', 'q0', 'q1', 'q1']);
  });

  it('on a server that speaks plain HTTP: exit 2 saying to give http://', async () => {
    const https = simUrl.replace(/^http:/, 'https:');
    const run = await cli(execute(https));
    expect(run.code).toBe(2);
    expect(run.stderr).toContain(`cannot send to ${https}/v1/models: ERR_SSL_WRONG_VERSION_NUMBER: the server at that port speaks plain HTTP, not TLS: give its URL as http://`);
  });
});
