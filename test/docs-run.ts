import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, cpSync, existsSync, mkdirSync, readdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { dirname, join } from 'node:path';

/**
 * How test/docs-commands.test.ts runs a doc's commands as a newcomer would: in a copy of the
 * clone (its files as git sees them, `node_modules` linked, `dist` copied), with
 * `rollout-budget` on PATH as `npm link` would put it (a shim running the copy's
 * bin/rollout-budget.js), through bash, from the copy's root.
 */

/** Copies the clone's files (tracked, and untracked ones git does not ignore) into `to`. */
export function copyClone(root: string, to: string): void {
  const git = spawnSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], { cwd: root, encoding: 'utf8' });
  const files = git.status === 0 ? git.stdout.split('\0').filter((f) => f !== '') : walk(root, '');
  for (const f of files) {
    if (!existsSync(join(root, f))) continue; // deleted in the work tree, still in the index
    mkdirSync(dirname(join(to, f)), { recursive: true });
    cpSync(join(root, f), join(to, f));
  }
  if (existsSync(join(root, 'node_modules'))) symlinkSync(join(root, 'node_modules'), join(to, 'node_modules'), 'dir');
  if (existsSync(join(root, 'dist'))) cpSync(join(root, 'dist'), join(to, 'dist'), { recursive: true });
}

/** Without git: every file but the installed, built and generated folders. */
function walk(root: string, rel: string): string[] {
  return readdirSync(join(root, rel), { withFileTypes: true }).flatMap((e) => {
    const path = rel === '' ? e.name : `${rel}/${e.name}`;
    if (e.isDirectory()) return ['node_modules', 'dist', 'out', '.git', '.tmp'].includes(path) ? [] : walk(root, path);
    return [path];
  });
}

/** A folder holding `rollout-budget`, which runs `cli` with this Node: put it first on PATH. */
export function cliShim(dir: string, cli: string): string {
  mkdirSync(dir, { recursive: true });
  const shim = join(dir, 'rollout-budget');
  writeFileSync(shim, `#!/bin/sh\nexec '${process.execPath}' '${cli}' "$@"\n`);
  chmodSync(shim, 0o755);
  return dir;
}

/** A TCP port free on 127.0.0.1 now. */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** The ports a text names: `--port N`, `127.0.0.1:N`, `localhost:N`. */
export function portsIn(text: string): number[] {
  return [...text.matchAll(/(?:--port[ =]|(?:127\.0\.0\.1|localhost):)(\d{2,5})\b/g)].map((m) => Number(m[1]));
}

/** `text` with every port of `map` replaced where it is named as a port. */
export function withPorts(text: string, map: ReadonlyMap<number, number>): string {
  return text.replace(/(--port[ =]|(?:127\.0\.0\.1|localhost):)(\d{2,5})\b/g, (all, before: string, port: string) => {
    const to = map.get(Number(port));
    return to === undefined ? all : `${before}${to}`;
  });
}

export interface ShellRun {
  code: number | null;
  stdout: string;
  stderr: string;
  ms: number;
}

export interface ShellOptions {
  cwd: string;
  env: NodeJS.ProcessEnv;
  timeoutMs: number;
}

/** Runs one command line through bash; past the timeout its whole process group is killed. */
export function runShell(command: string, options: ShellOptions): Promise<ShellRun> {
  const start = Date.now();
  const child = spawn('bash', ['-c', command], { cwd: options.cwd, env: options.env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => void (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => void (stderr += d.toString()));
  const timer = setTimeout(() => killGroup(child.pid, 'SIGKILL'), options.timeoutMs);
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr: Date.now() - start >= options.timeoutMs ? `${stderr}\n(killed after ${options.timeoutMs} ms)` : stderr, ms: Date.now() - start });
    });
  });
}

export interface Background {
  readonly command: string;
  output(): string;
  /** SIGTERM to its process group, SIGKILL 5 s later; resolves when it has exited. */
  stop(): Promise<void>;
}

/**
 * Starts a command that ends in `&` (a server) and resolves once it prints "listening on", as
 * sim-server and serve do; rejects if it exits first or stays silent past the timeout.
 */
export function startBackground(command: string, options: ShellOptions): Promise<Background> {
  const child = spawn('bash', ['-c', `exec ${command}`], { cwd: options.cwd, env: options.env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const exited = new Promise<void>((resolve) => child.on('close', () => resolve()));
  const handle: Background = {
    command,
    output: () => output,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      killGroup(child.pid, 'SIGTERM');
      const timer = setTimeout(() => killGroup(child.pid, 'SIGKILL'), 5_000);
      await exited;
      clearTimeout(timer);
    },
  };
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      void handle.stop();
      reject(new Error(`"${command}" did not say "listening on" within ${options.timeoutMs} ms: ${output}`));
    }, options.timeoutMs);
    const seen = (d: Buffer) => {
      output += d.toString();
      if (/listening on/.test(output)) {
        clearTimeout(timer);
        resolve(handle);
      }
    };
    child.stdout.on('data', seen);
    child.stderr.on('data', seen);
    void exited.then(() => {
      clearTimeout(timer);
      reject(new Error(`"${command}" exited (code ${child.exitCode}) before it was listening: ${output}`));
    });
  });
}

function killGroup(pid: number | undefined, signal: NodeJS.Signals): void {
  if (pid === undefined) return;
  try {
    process.kill(-pid, signal);
  } catch {
    // already gone
  }
}
