import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { PostgresStore } from '../src/index.js';
import { noteSchema } from './pg-schemas.js';
import { tempDir } from './temp.js';

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
export const CLI = join(ROOT, 'bin', 'rollout-budget.js');

/**
 * The PostgreSQL URL for tests (RB_PG_URL, set by `.ci/setup-postgres.sh start`). In CI a
 * missing URL is a failure, not a skip; locally the PostgreSQL tests skip with a message.
 */
export function pgUrl(): string | undefined {
  const url = process.env.RB_PG_URL;
  if (url === undefined || url === '') {
    if (process.env.CI === 'true') throw new Error('RB_PG_URL is not set but CI=true: run `eval "$(.ci/setup-postgres.sh start)"` before the tests');
    console.warn('RB_PG_URL not set: skipping the PostgreSQL tests (eval "$(.ci/setup-postgres.sh start)" to run them)');
    return undefined;
  }
  return url;
}

/** A URL for a fresh, empty schema of the test database. */
export function freshPgUrl(base: string): string {
  const u = new URL(base);
  const schema = `t_${randomBytes(6).toString('hex')}`;
  u.searchParams.set('schema', schema);
  noteSchema(base, schema); // dropped after the file's last test (test/setup/temp-check.ts)
  return u.toString();
}

/** Drops the schema a `freshPgUrl` names, through a connection to `base`. */
export async function dropPgSchema(base: string, schemaUrl: string): Promise<void> {
  const client = new pg.Client({ connectionString: base });
  await client.connect();
  try {
    await client.query(`DROP SCHEMA IF EXISTS "${new URL(schemaUrl).searchParams.get('schema')}" CASCADE`);
  } finally {
    await client.end();
  }
}

/**
 * Runs `body` against `serve` on a SQLite state in `dir`, then on a fresh PostgreSQL schema when
 * RB_PG_URL is set: each service stopped (a non-zero exit throws) and its schema dropped after.
 * Returns the states it ran on.
 */
export async function onEachServiceState(dir: string, body: (port: number, state: string) => Promise<void>): Promise<string[]> {
  const base = pgUrl();
  const states = [join(dir, 'serve.db'), ...(base === undefined ? [] : [freshPgUrl(base)])];
  for (const state of states) {
    const child = await startService(['--state', state]);
    try {
      await body(child.port, state);
    } finally {
      const { code } = await stopService(child);
      if (state.startsWith('postgres')) await dropPgSchema(base!, state);
      if (code !== 0) throw new Error(`serve --state ${state} exited ${code}`);
    }
  }
  return states;
}

export async function openPg(base: string): Promise<PostgresStore> {
  return PostgresStore.connect(freshPgUrl(base));
}

export interface Child {
  readonly proc: ChildProcess;
  readonly port: number;
  stderr(): string;
  /** Resolves with the exit code (or signal) when the process ends. */
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/**
 * Starts `rollout-budget serve --port 0 ...` and waits for its "listening" line. `fileSizeKb`:
 * the largest file the service may write (bash's `ulimit -f`), past which a write fails (EFBIG).
 */
export async function startService(args: readonly string[], timeoutMs = 15_000, env?: NodeJS.ProcessEnv, fileSizeKb?: number): Promise<Child> {
  const argv = [CLI, 'serve', '--host', '127.0.0.1', '--port', '0', ...args];
  const [command, commandArgs] = fileSizeKb === undefined
    ? [process.execPath, argv]
    : ['bash', ['-c', `ulimit -f ${fileSizeKb} && exec "$0" "$@"`, process.execPath, ...argv]];
  const proc = spawn(command, commandArgs, {
    stdio: ['ignore', 'pipe', 'pipe'],
    ...(env === undefined ? {} : { env: { ...process.env, ...env } }),
  });
  let err = '';
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => proc.on('exit', (code, signal) => resolve({ code, signal })));
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`service did not start: ${err}`)), timeoutMs);
    proc.stderr!.on('data', (chunk: Buffer) => {
      err += chunk.toString();
      const m = /listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(err);
      if (m) {
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
    });
    void exited.then(({ code }) => {
      clearTimeout(timer);
      reject(new Error(`service exited (${code}) before listening: ${err}`));
    });
  });
  return { proc, port, stderr: () => err, exited };
}

/** SIGTERM, then SIGKILL if the service has not stopped within `graceMs` (no process outlives a failed test). */
export async function stopService(child: Child, graceMs = 30_000): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  if (child.proc.exitCode === null && child.proc.signalCode === null) child.proc.kill('SIGTERM');
  const timer = setTimeout(() => child.proc.kill('SIGKILL'), graceMs);
  try {
    return await child.exited;
  } finally {
    clearTimeout(timer);
  }
}

/**
 * One HTTP request as a client library sends it: a body goes with `Content-Type:
 * application/json` unless `headers` says otherwise.
 */
export async function call(
  port: number,
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; json: any; text: string; headers: Headers }> {
  const res = await fetch(`http://127.0.0.1:${port}${path}`, {
    method,
    signal: AbortSignal.timeout(30_000), // a frozen service fails the test, it does not hang it
    headers: { ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
    ...(body === undefined ? {} : { body: typeof body === 'string' || body instanceof Uint8Array ? body : JSON.stringify(body) }),
  });
  const text = await res.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, json, text, headers: res.headers };
}

/** p-th percentile (0..100) of values, nearest rank. */
export function percentile(values: readonly number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

export interface RawAnswer {
  status: number;
  headers: import('node:http').IncomingHttpHeaders;
  text: string;
  json: any;
}

/**
 * One HTTP request with exactly the headers given (node:http sets nothing but Host, which a
 * `host` header overrides, and Content-Length): for Host, Origin, Content-Type and token tests.
 */
export async function request(
  port: number,
  method: string,
  path: string,
  headers: Record<string, string> = {},
  body?: string | Uint8Array,
): Promise<RawAnswer> {
  const { request: httpRequest } = await import('node:http');
  return new Promise<RawAnswer>((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port, method, path, headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let json: unknown;
        try {
          json = JSON.parse(text);
        } catch {
          json = undefined;
        }
        resolve({ status: res.statusCode ?? 0, headers: res.headers, text, json });
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** Runs `rollout-budget serve ...` that should stop on its own; kills it after `timeoutMs`. */
export async function runServe(args: readonly string[], timeoutMs = 15_000): Promise<{ code: number | null; stderr: string; stdout: string }> {
  const proc = spawn(process.execPath, [CLI, 'serve', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  let stdout = '';
  proc.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  proc.stdout!.on('data', (d: Buffer) => (stdout += d.toString()));
  const timer = setTimeout(() => proc.kill('SIGKILL'), timeoutMs);
  const code = await new Promise<number | null>((resolve) => proc.on('exit', (c) => resolve(c)));
  clearTimeout(timer);
  return { code, stderr, stdout };
}

/** Feeds NDJSON lines (strings or bytes) to `serve --stdio` and returns the parsed replies and the exit code. */
export async function stdioSession(args: readonly string[], input: string | Uint8Array, timeoutMs = 30_000): Promise<{ code: number | null; replies: any[]; stderr: string }> {
  const proc = spawn(process.execPath, [CLI, 'serve', '--stdio', ...args], { stdio: ['pipe', 'pipe', 'pipe'] });
  let out = '';
  let stderr = '';
  proc.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  proc.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  proc.stdin!.end(input);
  const timer = setTimeout(() => proc.kill('SIGKILL'), timeoutMs);
  const code = await new Promise<number | null>((resolve) => proc.on('exit', (c) => resolve(c)));
  clearTimeout(timer);
  const replies = out.trim() === '' ? [] : out.trim().split('\n').map((l) => JSON.parse(l));
  return { code, replies, stderr };
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * State files for the services a test file starts: a folder of the file's own (`tempDir(prefix)`,
 * removed after its last test), and a new file name in it at each call.
 */
export function stateFiles(prefix: string): () => string {
  const dir = tempDir(prefix);
  let files = 0;
  return () => join(dir, `s${files++}.db`);
}
