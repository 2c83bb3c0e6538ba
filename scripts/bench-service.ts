/**
 * `npm run bench` section: the service's POST /v1/plan (`serve --plan-threads 2`, a real HTTP
 * server in its own process). A plan reads its candidates' rows and the pooled rows
 * (store/pooled.ts), so its cost should follow the request, not the state: 4,096 candidates
 * on a state of 10³ and of 10⁶ prompts, one client, as many of them tracked by either state
 * (`matched`; and, as until 2026-11-27, drawn from the whole 10⁶ state, where ~8× as many
 * are tracked: a tracked candidate's row is read and its posterior made, a new one's is not);
 * then 16 concurrent clients of 256 candidates each on the 10⁶-prompt state, p50 and p99 in
 * two windows: the first seconds after the service starts, and the steady state that a service
 * running for hours sees (after as long again under load). Reference: JSON.parse of the
 * request and of the answer (the bytes every plan must read and a client must parse).
 *
 * The clients run in this process, on the cores the service plans on: with 16 clients always
 * waiting, the service is never idle, so a latency is mostly the queue: by Little's law the mean latency is
 * at least clients × (CPU a plan) / cores. So the CPU each plan cost is printed beside it: serve's (every thread of
 * its process, from /proc on Linux; a PostgreSQL server's own CPU is not in it) and the
 * clients'. Request bodies are made before the clock starts (a trainer makes its own; what a
 * client does per request here is send it and read the whole answer).
 */
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import { availableParallelism } from 'node:os';
import { benchDir, warmState } from './bench-inputs.js';
import { CLI, fmtS, fmtX, median, spawnNode, table } from './bench-util.js';

const mean = (xs: readonly number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
const pct = (xs: readonly number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))]!;

/** CPU milliseconds a process has used (all its threads: /proc/<pid>/stat, 100 ticks a second), or undefined off Linux. */
function cpuMsOf(pid: number | undefined): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) * 10;
  } catch {
    return undefined;
  }
}

/** Starts `serve` on a state and returns its base URL, its CPU so far and a stop function. */
async function serve(state: string): Promise<{ url: string; cpuMs: () => number | undefined; stop: () => Promise<void> }> {
  const child = spawnNode([CLI, 'serve', '--state', state, '--host', '127.0.0.1', '--port', '0', '--plan-threads', '2', '--plan-timeout-s', '120']);
  let err = '';
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`serve did not start: ${err}`)), 120_000);
    child.stderr!.on('data', (chunk: Buffer) => {
      err += chunk.toString();
      const m = /listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(err);
      if (m !== null) {
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
    });
    child.on('exit', (code) => reject(new Error(`serve exited ${code}: ${err}`)));
  });
  return {
    url: `http://127.0.0.1:${port}`,
    cpuMs: () => cpuMsOf(child.pid),
    stop: async () => {
      child.kill('SIGTERM');
      await once(child, 'exit');
    },
  };
}

/** The `count` prompt numbers of a request drawn from a pool of `pool` (a seeded pick, no repeats). */
export function draw(count: number, pool: number, seed: number): number[] {
  const picked: number[] = [];
  const seen = new Set<number>();
  let x = seed + 1;
  while (picked.length < count) {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0;
    const i = x % Math.max(pool, count * 2);
    if (seen.has(i)) continue;
    seen.add(i);
    picked.push(i);
  }
  return picked;
}

const body = (numbers: readonly number[]) => JSON.stringify({ candidates: numbers.map((i) => ({ id: `prompt-${i}` })), budget: { rollouts: 8 * numbers.length } });

/** A plan request of `count` candidates from a pool of `pool` prompt ids. */
function planBody(count: number, pool: number, seed: number): string {
  return body(draw(count, pool, seed));
}

/** Whether a state of `size` prompts (bench-inputs warmState, bench-pg pgStates) tracks prompt number `i`. */
export const tracks = (size: number, i: number) => i < size && i % 10 !== 9;

/**
 * The request `draw(count, small, seed)` sends to the `small`-prompt state, made for the
 * `large`-prompt one: as many of its candidates tracked there, and as many new. A tracked
 * candidate costs more than a new one (its row is read and its posterior updated), so this body
 * differs from the small state's in the state's size alone; `draw(count, large, seed)` has
 * ~8× as many tracked candidates on the 10⁶-prompt state as on the 10³ one. A tracked candidate
 * becomes one drawn from the whole large state (no repeats), a new one a number past its end.
 */
export function matched(count: number, small: number, large: number, seed: number): number[] {
  const used = new Set<number>();
  let x = seed + 7;
  return draw(count, small, seed).map((i) => {
    if (!tracks(small, i)) return large + i;
    let j: number;
    do {
      x = (Math.imul(x, 1103515245) + 12345) >>> 0;
      j = x % large;
    } while (!tracks(large, j) || used.has(j));
    used.add(j);
    return j;
  });
}

/**
 * The clients' connections: node:http with keep-alive. fetch() (undici) cost the bench's
 * process ~3 ms of CPU a request, on the cores the service plans on; this ~1 ms.
 */
const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });

function post(url: string, body: string): Promise<{ ms: number; text: string }> {
  const t0 = performance.now();
  return new Promise((resolve, reject) => {
    const headers = { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) };
    const req = http.request(`${url}/v1/plan`, { method: 'POST', agent, headers }, (res) => {
      const parts: Buffer[] = [];
      res.on('data', (part: Buffer) => parts.push(part));
      res.on('error', reject);
      res.on('end', () => {
        const text = Buffer.concat(parts).toString('utf8');
        if (res.statusCode !== 200) reject(new Error(`plan: ${res.statusCode} ${text.slice(0, 200)}`));
        else resolve({ ms: performance.now() - t0, text });
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** JSON.parse of the request and the answer (median of 5). */
function parseReference(body: string, answer: string): number {
  const ts: number[] = [];
  for (let k = 0; k < 5; k++) {
    const t0 = performance.now();
    JSON.parse(body);
    JSON.parse(answer);
    ts.push(performance.now() - t0);
  }
  return median(ts);
}

export interface ServiceFigures {
  /** p50 and p99 (and plans) are the steady state's; `first` the first seconds' after the start. */
  /** small, large: p50 of 4,096 candidates on the 10³ and the 10⁶ state, as many tracked; drawn: on the 10⁶ state, drawn from all of it. */
  backend: string; small: number; large: number; drawn: number; p50: number; p99: number; plans: number; first: { p50: number; p99: number };
  /** CPU milliseconds a plan under 16 clients: serve's process (undefined off Linux) and the clients'. */
  serveCpu?: number; clientCpu: number;
}

/** One backend: `states(size)` gives a state location with `size` prompts. */
export async function serviceBench(backend: string, stateOf: (size: number) => Promise<string>, clients = 16, seconds = 5): Promise<ServiceFigures> {
  // The two states' services run side by side and take turns, plan by plan (one at a time): a
  // machine that slows down part-way (by a third, over minutes) then moves both alike, and
  // their ratio stays fair (an A/A test, the same state on both: 0.95-1.01, against 0.69-1.10
  // when one state's plans all ran before the other's, as until 2026-11-27). The 10⁶ state's
  // service gets two requests a turn: the 10³ state's request made for it (as many tracked
  // candidates; the target's ratio) and one drawn from its whole state (as until 2026-11-27).
  const sizes = [1e3, 1e6] as const;
  const kinds = [
    { service: 0, numbers: (k: number) => draw(4096, sizes[0], k) },
    { service: 1, numbers: (k: number) => matched(4096, sizes[0], sizes[1], k) },
    { service: 1, numbers: (k: number) => draw(4096, sizes[1], k) },
  ];
  const tracked = kinds.map(() => 0);
  const single: { p50: number; p99: number; reference: number }[] = [];
  const services: Awaited<ReturnType<typeof serve>>[] = [];
  try {
    for (const size of sizes) services.push(await serve(await stateOf(size)));
    const ms = kinds.map(() => [] as number[]);
    const last = kinds.map(() => ({ body: '', text: '' }));
    const bodies = kinds.map((kind, i) => Array.from({ length: 33 }, (_, k) => {
      const numbers = kind.numbers(k);
      tracked[i]! += numbers.filter((n) => tracks(sizes[kind.service]!, n)).length / 33;
      return body(numbers);
    }));
    for (let k = 0; k < 33; k++) {
      const order = [0, 1, 2].map((i) => (i + k) % 3);
      for (const i of k % 2 === 0 ? order : order.reverse()) {
        const r = await post(services[kinds[i]!.service]!.url, bodies[i]![k]!);
        if (k >= 3) ms[i]!.push(r.ms);
        last[i] = { body: bodies[i]![k]!, text: r.text };
      }
    }
    kinds.forEach((_, i) => single.push({ p50: median(ms[i]!), p99: pct(ms[i]!, 99), reference: parseReference(last[i]!.body, last[i]!.text) }));
  } finally {
    await Promise.all(services.map((service) => service.stop()));
  }
  const service = await serve(await stateOf(1e6));
  let first: LoadFigures;
  let steady: LoadFigures;
  let reference = 0;
  try {
    // Warm-up, unmeasured: every client a few plans at once, so every planning thread has
    // opened its connection and compiled its code (four plans one at a time warmed one thread;
    // the other then started cold inside the measured run, and its first plans made the p99).
    await Promise.all(Array.from({ length: clients }, async (_, c) => {
      for (let k = 0; k < 4; k++) await post(service.url, planBody(256, 1e6, 1000 + 10 * c + k));
    }));
    // Enough bodies for any client's share of a window (~400 plans a second here), each its own.
    const bodies = Array.from({ length: clients }, (_, c) => Array.from({ length: 64 }, (_, k) => planBody(256, 1e6, 10_000 * (c + 1) + k)));
    // The first seconds after the start, then, after as long again under load (unmeasured),
    // the steady state: V8 keeps optimizing the plan's code through the first ~10 s of load.
    first = await load(service, bodies, seconds, (body, text) => (reference = parseReference(body, text)));
    await load(service, bodies, seconds);
    steady = await load(service, bodies, seconds);
  } finally {
    await service.stop();
  }
  const [s, m, l] = single as [typeof single[0], typeof single[0], typeof single[0]];
  console.log(`\nservice POST /v1/plan on ${backend} (serve --plan-threads 2; the clients run in this process, on the same cores):`);
  table(['state', 'candidates', 'clients', 'window', 'p50', 'p99', 'reference', 'p50 / reference'], [
    ['10³ prompts', `4096, ${tracked[0]!.toFixed(0)} tracked`, '1', '30 plans', fmtS(s.p50 / 1000), fmtS(s.p99 / 1000), fmtS(s.reference / 1000), fmtX(s.p50, s.reference)],
    ['10⁶ prompts', `4096, ${tracked[1]!.toFixed(0)} tracked`, '1', '30 plans', fmtS(m.p50 / 1000), fmtS(m.p99 / 1000), fmtS(m.reference / 1000), fmtX(m.p50, m.reference)],
    ['10⁶ prompts', `4096, ${tracked[2]!.toFixed(0)} tracked`, '1', '30 plans', fmtS(l.p50 / 1000), fmtS(l.p99 / 1000), fmtS(l.reference / 1000), fmtX(l.p50, l.reference)],
    ['10⁶ prompts', '256', String(clients), `first ${seconds} s`, fmtS(first.p50 / 1000), fmtS(first.p99 / 1000), fmtS(reference / 1000), fmtX(first.p50, reference)],
    ['10⁶ prompts', '256', String(clients), `steady ${seconds} s`, fmtS(steady.p50 / 1000), fmtS(steady.p99 / 1000), fmtS(reference / 1000), fmtX(steady.p50, reference)],
  ]);
  console.log(`state 10⁶ vs 10³, 4,096 candidates, as many tracked: ${fmtX(m.p50, s.p50)} the p50 (target: within 2×); ` +
    `drawn from the whole 10⁶ state (${(tracked[2]! / tracked[0]!).toFixed(1)}× as many tracked): ${fmtX(l.p50, s.p50)}`);
  console.log(`${clients} clients: ${first.plans} plans in the first ${seconds} s ` +
    `(after 4 plans a client), ${steady.plans} in ${seconds} s of the steady state (after ${seconds} s more under load, unmeasured)`);
  const cores = availableParallelism();
  for (const [name, f] of [['first', first], ['steady', steady]] as const) {
    const serveText = f.serveCpu === undefined ? 'serve n/a (no /proc)' : `serve ${f.serveCpu.toFixed(2)} ms (all its threads${backend === 'SQLite' ? '' : `; the ${backend} server's not counted`})`;
    const bound = f.serveCpu === undefined ? '' : `; with ${cores} cores shared, the mean latency (${f.mean.toFixed(0)} ms) ≥ ${clients} × ${(f.serveCpu + f.clientCpu).toFixed(2)} / ${cores} = ${((clients * (f.serveCpu + f.clientCpu)) / cores).toFixed(0)} ms`;
    console.log(`CPU a plan under ${clients} clients (${name} ${seconds} s): ${serveText}, the clients ${f.clientCpu.toFixed(2)} ms${bound}`);
  }
  return {
    backend, small: s.p50, large: m.p50, drawn: l.p50, p50: steady.p50, p99: steady.p99, plans: steady.plans, first: { p50: first.p50, p99: first.p99 },
    ...(steady.serveCpu === undefined ? {} : { serveCpu: steady.serveCpu }), clientCpu: steady.clientCpu,
  };
}

/** One window of load: latencies and CPU a plan. */
interface LoadFigures { p50: number; p99: number; mean: number; plans: number; serveCpu?: number; clientCpu: number }

/**
 * Every client posts its bodies one after another for `seconds`; `sample` gets the first
 * client's first request and answer (for the reference).
 */
async function load(service: { url: string; cpuMs: () => number | undefined }, bodies: readonly (readonly string[])[], seconds: number, sample?: (body: string, text: string) => void): Promise<LoadFigures> {
  const latencies: number[] = [];
  const serve0 = service.cpuMs();
  const client0 = process.cpuUsage();
  const end = performance.now() + seconds * 1000;
  await Promise.all(bodies.map(async (own, c) => {
    for (let k = 0; performance.now() < end; k++) {
      const body = own[k % own.length]!;
      const r = await post(service.url, body);
      latencies.push(r.ms);
      if (c === 0 && k === 0) sample?.(body, r.text);
    }
  }));
  const used = process.cpuUsage(client0);
  const serve1 = service.cpuMs();
  const figures: LoadFigures = { p50: pct(latencies, 50), p99: pct(latencies, 99), mean: mean(latencies), plans: latencies.length, clientCpu: (used.user + used.system) / 1000 / latencies.length };
  if (serve0 !== undefined && serve1 !== undefined) figures.serveCpu = (serve1 - serve0) / latencies.length;
  return figures;
}

/** SQLite states for the service section (written once, reused by both sizes' runs). */
export function sqliteStates(): (size: number) => Promise<string> {
  const made = new Map<number, string>();
  benchDir();
  return async (size) => {
    let path = made.get(size);
    if (path === undefined) made.set(size, (path = warmState(size, `service-${size}.db`)));
    return path;
  };
}
