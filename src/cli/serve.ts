import { Option, type Command } from 'commander';
import { RolloutBudgetError } from '../errors.js';
import { MAX_STRING_LENGTH } from '../io/utf8.js';
import { redactUrl } from '../store/url.js';
import { fileIdentity } from '../store/file-identity.js';
import { requireWritable } from '../store/sqlite-read-only.js';
import { openAsyncStore, storeKindOf } from '../store/open.js';
import { AsyncAllocator } from '../service/async-allocator.js';
import { isLoopback } from '../service/guard.js';
import { startHttpService } from '../service/http.js';
import { PlanWorkers } from '../service/plan-worker.js';
import { Service } from '../service/router.js';
import { serveStdio } from '../service/stdio.js';
import { describe } from './catalog.js';
import type { CliIo } from './io.js';
import { isNewStateFile, openCreated, removeStateFile, stillEmpty } from './new-state.js';
import { decayFlags, planOptionsFrom, stateFlag } from './options.js';
import { stopSignals } from './signals.js';
import { bearerSecret, intArg, numberArg } from './parse.js';

interface ServeOptions {
  state: string;
  host: string;
  port: number;
  stdio: boolean;
  bodyLimit: number;
  token?: string;
  allowedHosts?: string;
  planTimeoutS: number;
  planThreads: number;
  decay?: number;
  reobserveDiscount?: number;
}

/**
 * The most planning threads: each is a V8 isolate with its own store connection (tens of MB), so
 * 10,000 of them ran the process out of memory (a V8 fatal error, exit 133) and left the new state's
 * files behind. Planning is CPU-bound: more threads than cores only queue.
 */
export const MAX_PLAN_THREADS = 64;

/** The environment variable `serve` reads the token from when --token is not given. */
export const TOKEN_ENV = 'ROLLOUT_BUDGET_TOKEN';

/** The bearer token: --token, else $ROLLOUT_BUDGET_TOKEN; an empty one is a mistake, not "none". */
function tokenOf(opts: ServeOptions): string | undefined {
  return bearerSecret(opts.token, '--token', TOKEN_ENV);
}

/** `rollout-budget serve`: the allocator as a long-running HTTP or stdio service. */
export function registerServeCommands(program: Command, io: CliIo): void {
  const command = stateFlag(program.command('serve').description(describe('serve')), 'SQLite file, or postgres://user@host:port/db[?schema=name]')
    .option('--host <addr>', 'address to listen on', '127.0.0.1')
    .addOption(new Option('--port <int>', 'port (0: any free port)').default(8080).argParser(intArg(0)))
    .option('--stdio', 'NDJSON requests on stdin, responses on stdout, instead of HTTP', false)
    .addOption(new Option('--body-limit <bytes>', `largest request body (413 above it), at most ${MAX_STRING_LENGTH} (the longest string Node holds)`).default(8 * 1024 * 1024).argParser(intArg(1, MAX_STRING_LENGTH)))
    .option('--token <token>', `require "Authorization: Bearer <token>" (default: $${TOKEN_ENV}); needed for a --host other than loopback`)
    .option('--allowed-hosts <names>', 'comma-separated Host header names to accept besides IP addresses, localhost, --host and this machine\'s name ("*": any)')
    .addOption(new Option('--plan-timeout-s <s>', 'a plan request not answered within this many seconds gets 503').default(10).argParser(numberArg(0.001, 86_400)))
    .addOption(new Option('--plan-threads <n>', `threads that plan, each with its own store connection (at most ${MAX_PLAN_THREADS})`).default(1).argParser(intArg(1, MAX_PLAN_THREADS)));
  decayFlags(command, 'every request\'s default ');
  command
    .action(async (opts: ServeOptions) => {
      if (opts.port > 65535) throw new RolloutBudgetError('BAD_OPTION', `--port must be at most 65535, got ${opts.port}`);
      const token = tokenOf(opts);
      if (!opts.stdio && token === undefined && !isLoopback(opts.host)) {
        throw new RolloutBudgetError(
          'BAD_OPTION',
          `--host ${opts.host} is reachable from other machines: give --token <token> or set ${TOKEN_ENV} (clients send "Authorization: Bearer <token>"), or listen on 127.0.0.1`,
        );
      }
      const log = (line: string) => io.stderr(`rollout-budget serve: ${line}\n`);
      const signal = stopSignals();
      // A SQLite state file this call creates is removed again if the service never starts (a port in use).
      const created = isNewStateFile(opts.state);
      if (storeKindOf(opts.state) === 'sqlite') requireWritable(opts.state, 'serve writes each observe and the prompts it plans into it');
      const store = await openCreated(opts.state, created, () => openAsyncStore(opts.state));
      const defaults = planOptionsFrom(opts); // the decay pair, every request's default
      const where = storeKindOf(opts.state) === 'postgres' ? redactUrl(opts.state) : opts.state;
      for (const note of store.notes ?? []) log(`note: ${note}`);
      let planner: PlanWorkers | undefined;
      let started = false;
      try {
        // The pooled rows that plans and /healthz read, checked once against the prompts (a
        // writer that does not keep them left them behind: store/pooled.ts samePooled).
        const mended = await store.mendPooled?.();
        if (mended !== undefined) log(`note: ${mended}`);
        // ':memory:' cannot be opened twice: its plans run on the event loop, without a deadline
        if (opts.state === ':memory:') log('state :memory: is not shared with planning threads: plans run inline, without --plan-timeout-s');
        else {
          // The planning threads open this same file, or none (store/file-identity.ts).
          const file = storeKindOf(opts.state) === 'sqlite' ? fileIdentity(opts.state) : undefined;
          planner = new PlanWorkers({ state: opts.state, defaults, timeoutMs: opts.planTimeoutS * 1000, threads: opts.planThreads, log, ...(file === undefined ? {} : { file }) });
        }
        const service = new Service(new AsyncAllocator(store, defaults), log, planner);
        // After a stop, what is still in flight this long after it (a plan's deadline, and 2 s) is
        // cut, and a wait for a lock another process holds ends with nothing applied.
        const graceMs = opts.planTimeoutS * 1000 + 2_000;
        const stopWaiting = () => store.stopWaiting?.('the service is stopping');
        if (opts.stdio) {
          started = true;
          log(`reading NDJSON requests on stdin (state: ${store.kind} ${where})`);
          const done = serveStdio(service, process.stdin, process.stdout, opts.bodyLimit);
          const why = await Promise.race([done, signal.stopped]);
          if (why !== 'end of input' && why !== 'output closed') process.stdin.destroy();
          // Stopped by a signal: the requests in hand get the HTTP grace (it waited for a lock without bound).
          const grace = why === 'end of input' || why === 'output closed' ? undefined : setTimeout(() => void stopWaiting(), graceMs);
          await done;
          clearTimeout(grace);
          log(`stopping (${why})`);
        } else {
          const http = await startHttpService(service, {
            host: opts.host,
            port: opts.port,
            bodyLimit: opts.bodyLimit,
            closeGraceMs: graceMs,
            ...(token === undefined ? {} : { token }),
            ...(opts.allowedHosts === undefined ? {} : { allowedHosts: opts.allowedHosts.split(',') }),
          });
          started = true;
          // An IPv6 address goes in brackets, so the line's URL is one a client can use.
          const host = opts.host.includes(':') ? `[${opts.host}]` : opts.host;
          log(`listening on http://${host}:${http.port} (state: ${store.kind} ${where})`);
          const why = await signal.stopped;
          log(`stopping (${why}): finishing in-flight requests`);
          await http.close();
          // Every connection is answered or was cut: a batch still waiting for a lock has no
          // client left, so it is not applied (else the process stayed up until the lock freed,
          // then applied it).
          await stopWaiting();
          await service.idle();
        }
      } finally {
        signal.dispose();
        await planner?.close();
        const remove = !started && created && (await stillEmpty(async () => (await store.count()) === 0));
        await store.close();
        if (remove) removeStateFile(opts.state);
        if (started) log('store closed'); // a service that never started says only why
      }
    });
}
