import { Option, type Command } from 'commander';
import { RolloutBudgetError } from '../errors.js';
import { redactUrl } from '../store/postgres.js';
import { openAsyncStore, storeKindOf } from '../store/open.js';
import { AsyncAllocator } from '../service/async-allocator.js';
import { startHttpService } from '../service/http.js';
import { Service } from '../service/router.js';
import { serveStdio } from '../service/stdio.js';
import type { CliIo } from './io.js';
import { intArg, numberArg } from './parse.js';

interface ServeOptions {
  state: string;
  host: string;
  port: number;
  stdio: boolean;
  bodyLimit: number;
  decay?: number;
  reobserveDiscount?: number;
}

/** Resolves on the first SIGTERM or SIGINT; the handlers go away with it. */
function stopSignal(): { stopped: Promise<string>; dispose(): void } {
  let dispose = () => undefined as void;
  const stopped = new Promise<string>((resolve) => {
    const on = (sig: string) => () => resolve(sig);
    const term = on('SIGTERM');
    const int = on('SIGINT');
    process.once('SIGTERM', term);
    process.once('SIGINT', int);
    dispose = () => {
      process.off('SIGTERM', term);
      process.off('SIGINT', int);
    };
  });
  return { stopped, dispose };
}

/** `rollout-budget serve`: the allocator as a long-running HTTP or stdio service. */
export function registerServeCommands(program: Command, io: CliIo): void {
  program
    .command('serve')
    .description('serve plan/observe over HTTP (JSON) or stdio (NDJSON) on a SQLite or PostgreSQL state')
    .option('--state <path|url>', 'SQLite file, or postgres://user@host:port/db[?schema=name]', './rollout-budget.db')
    .option('--host <addr>', 'address to listen on', '127.0.0.1')
    .addOption(new Option('--port <int>', 'port (0: any free port)').default(8080).argParser(intArg(0)))
    .option('--stdio', 'NDJSON requests on stdin, responses on stdout, instead of HTTP', false)
    .addOption(new Option('--body-limit <bytes>', 'largest request body (413 above it)').default(8 * 1024 * 1024).argParser(intArg(1)))
    .addOption(new Option('--decay <rate>', 'default per-step forgetting of evidence (λ)').argParser(numberArg(0, 1)))
    .addOption(new Option('--reobserve-discount <rate>', 'default discount of old evidence on re-observation (ρ)').argParser(numberArg(0, 1)))
    .action(async (opts: ServeOptions) => {
      if (opts.port > 65535) throw new RolloutBudgetError('BAD_OPTION', `--port must be at most 65535, got ${opts.port}`);
      const log = (line: string) => io.stderr(`rollout-budget serve: ${line}\n`);
      const signal = stopSignal();
      const store = await openAsyncStore(opts.state);
      const defaults = {
        decay: {
          ...(opts.decay === undefined ? {} : { forgetPerStep: opts.decay }),
          ...(opts.reobserveDiscount === undefined ? {} : { reobserveDiscount: opts.reobserveDiscount }),
        },
      };
      const service = new Service(new AsyncAllocator(store, defaults), log);
      const where = storeKindOf(opts.state) === 'postgres' ? redactUrl(opts.state) : opts.state;
      try {
        if (opts.stdio) {
          log(`reading NDJSON requests on stdin (state: ${store.kind} ${where})`);
          const done = serveStdio(service, process.stdin, process.stdout, opts.bodyLimit);
          const why = await Promise.race([done.then(() => 'end of input'), signal.stopped]);
          if (why !== 'end of input') process.stdin.destroy();
          await done;
          log(`stopping (${why})`);
        } else {
          const http = await startHttpService(service, { host: opts.host, port: opts.port, bodyLimit: opts.bodyLimit });
          log(`listening on http://${opts.host}:${http.port} (state: ${store.kind} ${where})`);
          const why = await signal.stopped;
          log(`stopping (${why}): finishing in-flight requests`);
          await http.close();
          await service.idle();
        }
      } finally {
        signal.dispose();
        await store.close();
        log('store closed');
      }
    });
}
