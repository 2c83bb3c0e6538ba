import { InvalidArgumentError, Option, type Command } from 'commander';
import { Allocator, createRegistries } from '../allocator.js';
import { checkPlanCall } from '../plan/planner.js';
import { RolloutBudgetError, badOption } from '../errors.js';
import { MAX_OVER_PROVISION } from '../executor/check-options.js';
import { EndpointRests, defaultRetry } from '../executor/dispatcher.js';
import { normalizeEndpoint } from '../executor/endpoint.js';
import { checkExecuteInputs, commitPartials, executePlan, type InputCheckOptions } from '../executor/execute.js';
import { runLoop } from '../executor/loop.js';
import { PartialStore } from '../executor/partials.js';
import { SERVER_PROFILES, StoppedDetection, resolveServer } from '../executor/profiles.js';
import { checkExtraBody, extraBodyConflict } from '../executor/requests.js';
import { mergeSummaries, progressBar, summaryLine, tooLongWarning } from '../executor/summary.js';
import type { ExecuteOptions, ExecutedRollout } from '../executor/types.js';
import { settled } from '../executor/types.js';
import { DEFAULT_VERIFIER_TIMEOUT_S } from '../executor/verify/command.js';
import { verifierFrom } from '../executor/verify/verifiers.js';
import { parsePrompts } from '../io/formats.js';
import { DEFAULT_MAX_TOKENS } from '../plan/exports.js';
import { MAX_TOKEN_COUNT } from '../posterior/length.js';
import { SimModel, SHORT_COT, defaultSimModel } from '../simserver/model.js';
import { parseSimPrompts } from '../simserver/prompts.js';
import { SIM_REASONING_FIELDS } from '../simserver/stream.js';
import { SIM_PROFILES, SimServer } from '../simserver/server.js';
import { describe } from './catalog.js';
import { registerGradeCommand } from './grade.js';
import { checkOutput, readInput, writeOutput, type CliIo } from './io.js';
import { isNewStateFile, removeStateFile, stillEmpty } from './new-state.js';
import { readPlanInputs } from './plan-inputs.js';
import { requirePrompts } from './prompts-input.js';
import { stopSignals } from './signals.js';
import {
  boundFlags, budgetFlags, budgetFrom, multipleOfFlag, planOptionsFrom, policyFlags, roundsFlag, seedFlag, skipFlag, stateFlag, stepsFlag, promptFieldOption, verifierOption,
} from './options.js';
import { bearerSecret, intArg, numberArg } from './parse.js';

/**
 * Endpoints are checked when the command starts (endpoint.ts): a URL that cannot be sent is
 * never retried. Its error names --endpoint itself, so it is not commander's to wrap.
 */
const collect = (value: string, previous: string[] | undefined) => [...(previous ?? []), normalizeEndpoint(value)];

const extraBodyArg = (value: string): Record<string, unknown> => {
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch {
    throw new InvalidArgumentError(`must be a JSON object, got "${value}"`);
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) throw new InvalidArgumentError(`must be a JSON object, got "${value}"`);
  const conflict = extraBodyConflict(parsed as Record<string, unknown>);
  if (conflict !== undefined) throw new InvalidArgumentError(conflict);
  return parsed as Record<string, unknown>;
};

/** Options shared by `execute` and `loop`. */
function executorOptions(cmd: Command): Command {
  cmd
    .requiredOption('--prompts <path|->', 'prompts JSONL: id, prompt (or messages), ground_truth for --verifier math')
    .option('--endpoint <url>', 'OpenAI-compatible server base URL, http://host:port or http://host:port/v1 (repeat for several)', collect)
    .requiredOption('--model <name>', 'served model name')
    .addOption(new Option('--server <kind>', 'how requests are shaped for the server, or auto (asks GET /v1/models)').choices(['auto', ...Object.keys(SERVER_PROFILES)]).default('auto'))
    .addOption(promptFieldOption('prompts field holding the text to send (e.g. problem)'))
    .addOption(new Option('--api <api>', 'API to call (default: chat for prompts with messages, else completions)').choices(['chat', 'completions']))
    .addOption(new Option('--concurrency <int>', 'requests in flight at most').default(32).argParser(intArg(1)))
    .addOption(new Option('--request-n <int>', 'largest n of one request (larger groups are split)').default(16).argParser(intArg(1)))
    .addOption(verifierOption())
    .addOption(new Option('--verifier-timeout <s>', 'wall-clock limit of one command: verifier batch; its process group is killed after it').default(DEFAULT_VERIFIER_TIMEOUT_S).argParser(numberArg(0.001, 86_400)))
    .addOption(new Option('--over-provision <ratio>', 'launch up to (1 + r)·n rollouts per group, keep the first n').default(0).argParser(numberArg(0, MAX_OVER_PROVISION)))
    .addOption(new Option('--timeout-s <s>', 'a request that gets nothing from the server for this many seconds is aborted and retried (a streamed answer that keeps coming is never cut)').default(600).argParser(numberArg(0.001, 86_400)))
    .addOption(new Option('--retries <int>', 'retries per request on 5xx, connection errors and timeouts').default(4).argParser(intArg(0)))
    .addOption(new Option('--max-tokens <int>', 'max_tokens for prompts the plan gives none (servers default to 16 or 128)').default(DEFAULT_MAX_TOKENS).argParser(intArg(1, MAX_TOKEN_COUNT)))
    .addOption(new Option('--extra-body <json>', 'JSON object merged into every request body (top_p, stop, return_token_ids: false, ...)').argParser(extraBodyArg))
    .addOption(new Option('--temperature <t>', 'sampling temperature sent to the server').argParser(numberArg(0, 10)))
    .option('--api-key <key>', `sent as "Authorization: Bearer <key>" to servers started with --api-key (vLLM, SGLang) (default: $${API_KEY_ENV})`);
  return stateFlag(cmd, 'state database (partial rollouts live here too)', '<path>');
}

interface ExecFlags {
  endpoint?: string[];
  model: string;
  server: string;
  promptField: string;
  verifierTimeout: number;
  api?: 'chat' | 'completions';
  concurrency: number;
  requestN: number;
  verifier: string;
  overProvision: number;
  timeoutS: number;
  retries: number;
  temperature?: number;
  maxTokens: number;
  extraBody?: Record<string, unknown>;
  apiKey?: string;
}

/** The environment variable `--api-key` defaults to: the one OpenAI clients read. */
const API_KEY_ENV = 'OPENAI_API_KEY';

/** The API key: `--api-key`, else $OPENAI_API_KEY (unset or empty: none). */
function apiKeyOf(o: ExecFlags): string | undefined {
  return bearerSecret(o.apiKey, '--api-key', API_KEY_ENV, true);
}

/** The options the flags give before any input is read or server asked: the endpoints (at least one) and what checkExecuteInputs needs, its origin (where the inputs came from) left for the caller. */
function localOptions(o: ExecFlags): InputCheckOptions & { readonly endpoints: string[]; readonly apiKey?: string } {
  const endpoints = o.endpoint ?? [];
  if (endpoints.length === 0) throw badOption('give at least one --endpoint <url>');
  if (o.extraBody !== undefined) checkExtraBody(o.extraBody, o.temperature);
  const apiKey = apiKeyOf(o);
  return {
    endpoints,
    ...(apiKey === undefined ? {} : { apiKey }),
    verifier: verifierFrom(o.verifier, undefined, { timeoutMs: o.verifierTimeout * 1000 }),
    promptField: o.promptField,
    origin: {},
    ...(o.api === undefined ? {} : { api: o.api }),
    defaultMaxTokens: o.maxTokens,
  };
}

/** The library's execute options from the flags; with `--server auto`, asks the endpoints who they are. */
async function toExecuteOptions(io: CliIo, o: ExecFlags, partials: PartialStore, local: ReturnType<typeof localOptions>, interrupt: Interrupt): Promise<ExecuteOptions> {
  await local.verifier.preflight?.(); // a verifier that cannot run is named before any generation
  const retry = { retries: o.retries, backoffMs: defaultRetry.backoffMs, maxBackoffMs: defaultRetry.maxBackoffMs };
  // Ctrl-C while the servers are asked who they are ends the command at once (it waited out
  // every retry of a server that did not answer, then exited 1).
  const { profile, notes, unreachable } = await resolveServer(o.server, local.endpoints, retry, Math.min(o.timeoutS * 1000, 30_000), undefined, local.apiKey, interrupt.signal).catch((error: unknown) => {
    const by = interrupt.stopped();
    if (error instanceof StoppedDetection && by !== undefined) throw new RolloutBudgetError('INTERRUPTED', `interrupted (${by.name}) while asking the servers which they are: nothing was generated`, by.code);
    throw error;
  });
  for (const note of notes) io.stderr(`rollout-budget: ${note}\n`);
  // One for the whole command (every round and step of `loop`); a replica that did not answer
  // /v1/models starts resting, as if its first request had failed.
  const rests = new EndpointRests(local.endpoints.length);
  for (const i of unreachable) rests.failed(i, Date.now());
  return {
    ...local,
    rests,
    model: o.model,
    server: profile,
    concurrency: o.concurrency,
    requestN: o.requestN,
    overProvision: o.overProvision,
    timeoutMs: o.timeoutS * 1000,
    retry,
    partials,
    ...(o.extraBody === undefined ? {} : { extraBody: o.extraBody }),
    ...(o.temperature === undefined ? {} : { temperature: o.temperature }),
    ...(io.stderrIsTty ? { onProgress: progressBar(io.stderr) } : {}),
  };
}

/**
 * Closes the partial-rollout store; when `failedNew` (the command created the state file, then
 * failed) and the file holds nothing to keep (no partial rollout, no evidence), removes it:
 * a failed execute or loop leaves no empty state behind, and keeps what a rerun resumes from.
 */
async function closeStateOf(partials: PartialStore, failedNew: boolean, state: string): Promise<void> {
  const remove = failedNew && (await stillEmpty(() => partials.holdsNothing()));
  partials.close();
  if (remove) removeStateFile(state);
}

const jsonl = (rows: readonly ExecutedRollout[]) => rows.map((r) => `${JSON.stringify(r)}\n`).join('');

/** How `execute` and `loop` name a stop signal, and their exit code after it. */
const STOPPED_BY = { SIGINT: { name: 'Ctrl-C', code: 130 }, SIGTERM: { name: 'SIGTERM', code: 143 } } as const;

/**
 * Ctrl-C (SIGINT), or SIGTERM (a scheduler stopping the job), for a command that generates.
 * The first aborts `signal`: the run stops launching, aborts what is in flight (kept as
 * partials to resume, as over-provisioning's surplus is), and the command writes what finished
 * before it exits 130 (SIGINT) or 143 (SIGTERM). A second signal quits at once (signals.ts).
 */
/** A command's stop signal and what stopped it (interruptible). */
type Interrupt = { signal: AbortSignal; stopped(): { name: string; code: number } | undefined; dispose(): void };

function interruptible(io: CliIo): Interrupt {
  const stop = stopSignals((sig) => {
    const { name } = STOPPED_BY[sig];
    io.stderr(`rollout-budget: interrupted (${name}): stopping the generation; what finished is written, what is in flight is kept to resume (${name === 'Ctrl-C' ? 'Ctrl-C' : 'the signal'} again quits at once)\n`);
  });
  const stopped = () => {
    const sig = stop.received();
    return sig === undefined ? undefined : STOPPED_BY[sig];
  };
  return { signal: stop.signal, stopped, dispose: stop.dispose };
}

/** Registers `execute`, `loop`, `sim-server` (issue 4) and `grade` (issue 11). */
export function registerExecutorCommands(program: Command, io: CliIo): void {
  executorOptions(
    program
      .command('execute')
      .description(describe('execute'))
      .requiredOption('--plan <path|->', 'plan JSON from `plan`'),
  )
    .option('--out <path|->', 'results JSONL, as `observe` takes it', '-')
    .action(async (opts) => {
      checkOutput(opts.out, { '--plan': opts.plan, '--prompts': opts.prompts, '--state': opts.state }); // before the generation, which a mistyped --out folder would waste
      const flags = localOptions(opts); // --endpoint, --verifier, --extra-body, the API key: before the plan and the prompts are read
      const { plan, prompts, origin } = await readPlanInputs(io, opts.plan, opts.prompts);
      // Bad input is named before a server is asked who it is or the state is opened.
      const local = { ...flags, origin };
      checkExecuteInputs(plan, prompts, local);
      const created = isNewStateFile(opts.state);
      const partials = new PartialStore(opts.state);
      const interrupt = interruptible(io);
      let ok = false;
      try {
        // A plan for a step the state has observed (a plan run again, or one from another
        // state): its rollout ids repeat those observed, and observe counts them as duplicates.
        const last = partials.lastObservedStep();
        if (last !== null && plan.step <= last) {
          io.stderr(`rollout-budget: warning: ${opts.plan === '-' ? 'the plan' : opts.plan} is for step ${plan.step}, and ${opts.state} has observed up to step ${last}: its rollouts' ids repeat those of a step observed (if it ran there), and observe counts them as duplicates; plan the next step (${last + 1}) instead, unless you mean to generate this one again\n`);
        }
        const options = { ...(await toExecuteOptions(io, opts, partials, local, interrupt)), stop: interrupt.signal };
        // A run the server ended (retries spent, a request refused): as after Ctrl-C, what
        // finished is written and what was in flight kept to resume, then the error is raised.
        const { report, failure } = await settled(executePlan(plan, prompts, options));
        const finished = report.results.filter((r) => r.finish_reason !== 'abort').length;
        if (failure !== undefined && finished === 0 && report.partials.keep.length === 0) throw failure; // nothing to keep: as before
        const kept = `${finished} finished rollouts written to ${opts.out === '-' ? 'stdout' : opts.out}, ${report.partials.keep.length} in flight kept in ${opts.state} to resume`;
        writeOutput(io, opts.out, jsonl(report.results));
        commitPartials(partials, report);
        io.stderr(`${summaryLine(report.summary)}\n`);
        const tooLong = tooLongWarning(report.too_long ?? []);
        if (tooLong !== undefined) io.stderr(`rollout-budget: warning: ${tooLong}\n`);
        ok = true;
        if (failure !== undefined) throw new RolloutBudgetError(failure.code, `${failure.message}: ${kept}`, failure.exitCode, failure.fields);
        const by = interrupt.stopped();
        if (by !== undefined) throw new RolloutBudgetError('INTERRUPTED', `interrupted (${by.name}): ${kept}`, by.code);
      } finally {
        interrupt.dispose();
        await closeStateOf(partials, !ok && created, opts.state);
      }
    });

  const loop = executorOptions(
    program.command('loop').description(describe('loop')),
  );
  stepsFlag(loop, 'steps to run', 1);
  budgetFlags(loop, { rollouts: 'total rollouts a step', tokens: 'total generated tokens a step' });
  boundFlags(loop);
  skipFlag(loop, 'prompts may get 0 rollouts');
  policyFlags(loop);
  roundsFlag(loop);
  multipleOfFlag(loop, 'each round\'s total rollouts a multiple of this (rollout workers)');
  seedFlag(loop);
  loop.action(async (opts) => {
    // A flag the library rejects (an unknown --policy) before the prompts are read and the servers asked (a 10⁶-line file took 3.7 s).
    checkPlanCall(budgetFrom(opts), planOptionsFrom(opts), createRegistries());
    const flags = localOptions(opts); // --endpoint, --verifier, --extra-body, the API key: before the prompts are read too
    const input = await readInput(io, opts.prompts);
    // --max-tokens fills the candidates' max_tokens where they have none, as `plan --max-tokens`
    // does: the planner then knows the limit the server is sent (it assumed 1024 a rollout, and a
    // token budget planned 29 rollouts where 100 fit).
    const candidates = parsePrompts(input.text, input.name).map((c) => (c.max_tokens === undefined ? { ...c, max_tokens: opts.maxTokens as number } : c));
    requirePrompts(candidates.length, input.name);
    const local = { ...flags, origin: { prompts: input.name } };
    const created = isNewStateFile(opts.state);
    const partials = new PartialStore(opts.state); // first: it says why a PostgreSQL state is refused here
    let allocator: Allocator | undefined;
    const interrupt = interruptible(io);
    let ok = false;
    try {
      allocator = new Allocator({ state: opts.state });
      const rows = await runLoop(
        allocator,
        candidates,
        budgetFrom(opts),
        planOptionsFrom(opts),
        { ...(await toExecuteOptions(io, opts, partials, local, interrupt)), stop: interrupt.signal },
        opts.steps,
        (row) => {
          const s = mergeSummaries(row.rounds.map((r) => r.summary), row.rounds.flatMap((r) => r.results.filter((x) => x.finish_reason !== 'abort').map((x) => x.reward)));
          io.stdout(`${JSON.stringify({ step: row.step, prompts: row.prompts, planned: row.planned, rollouts: s.rollouts, aborted: s.aborted, resumed: s.resumed, applied: row.observed.applied, mean_reward: s.mean_reward, tokens: s.tokens, wall_s: s.wall_s, tokens_per_s: s.tokens_per_s, rounds: row.rounds.length })}\n`);
          io.stderr(`step ${row.step}: ${summaryLine(s)}\n`);
          // Once each: a step's rounds often plan with the same warning (prompts without length data).
          for (const w of new Set(row.plans.flatMap((plan) => plan.warnings))) io.stderr(`step ${row.step}: warning: ${w}\n`);
          const tooLong = tooLongWarning(row.rounds.flatMap((r) => r.too_long ?? []));
          if (tooLong !== undefined) io.stderr(`step ${row.step}: warning: ${tooLong}\n`);
        },
        opts.rounds,
      );
      ok = true;
      const by = interrupt.stopped();
      if (by !== undefined) {
        const last = rows.at(-1);
        const where = last === undefined ? 'before the first step' : `in step ${last.step}, whose finished rollouts are observed`;
        const kept = partials.count();
        throw new RolloutBudgetError('INTERRUPTED', `interrupted (${by.name}) ${where}; ${kept === 1 ? '1 partial rollout is' : `${kept} partial rollouts are`} kept in ${opts.state} and resumed first by the next run`, by.code);
      }
    } finally {
      interrupt.dispose();
      allocator?.close();
      await closeStateOf(partials, !ok && created, opts.state);
    }
  });

  program
    .command('sim-server')
    .description(describe('sim-server'))
    .option('--prompts <path>', 'prompts JSONL with ground_truth (and optional sim_pass_rate) the server answers')
    .addOption(promptFieldOption('prompts field holding the text (e.g. problem)'))
    .addOption(new Option('--profile <server>', 'behave as vllm, sglang (one seed per request, native /generate) or openai (standard fields only)').choices(SIM_PROFILES).default('vllm'))
    .addOption(new Option('--port <int>', 'port on 127.0.0.1 (0: any free port)').default(8000).argParser(intArg(0)))
    .option('--model <name>', 'served model name (other names get 404)')
    .addOption(new Option('--pass-alpha <a>', 'Beta α of pass rates').default(defaultSimModel.passAlpha).argParser(numberArg(1e-6, 1e6)))
    .addOption(new Option('--pass-beta <b>', 'Beta β of pass rates').default(defaultSimModel.passBeta).argParser(numberArg(1e-6, 1e6)))
    .addOption(new Option('--length-a <a>', 'log-length intercept (short-CoT fit 6.118)').default(SHORT_COT.a).argParser(numberArg(0, 20)))
    .addOption(new Option('--ms-per-token <ms>', 'generation time per token').default(0).argParser(numberArg(0, 1e4)))
    .addOption(new Option('--latency-ms <ms>', 'delay before the first byte').default(0).argParser(numberArg(0, 1e6)))
    .addOption(new Option('--error-rate <p>', 'probability of an injected 503').default(0).argParser(numberArg(0, 1)))
    .addOption(new Option('--drop-rate <p>', 'probability of a connection dropped mid-stream').default(0).argParser(numberArg(0, 1)))
    .addOption(new Option('--stream-error-rate <p>', "probability that a streamed answer's engine fails after its first chunk: vLLM 0.10-0.11's error chunk (code 400), then [DONE]").default(0).argParser(numberArg(0, 1)))
    .addOption(new Option('--reasoning <field>', "as a server with a reasoning parser: a chat answer's thinking in this field, only its closing sentence in content").choices(SIM_REASONING_FIELDS))
    .addOption(new Option('--seed <int>', 'server seed').default(0).argParser(intArg(0)))
    .addOption(new Option('--max-model-len <int>', 'context length in tokens (vLLM --max-model-len): a prompt too long for it with its max_tokens is a 400, as the server gives it').argParser(intArg(1)))
    .option('--api-key <key>', 'as a server started with --api-key: a request without "Authorization: Bearer <key>" is the 401 vLLM and SGLang give')
    .action(async (opts) => {
      const prompts = opts.prompts === undefined ? [] : parseSimPrompts((await readInput(io, opts.prompts)).text, opts.prompts, opts.promptField);
      const server = new SimServer({
        port: opts.port,
        prompts,
        ...(opts.model === undefined ? {} : { modelName: opts.model }),
        model: new SimModel({ passAlpha: opts.passAlpha, passBeta: opts.passBeta, length: { ...SHORT_COT, a: opts.lengthA }, seed: opts.seed }),
        msPerToken: opts.msPerToken,
        faults: { latencyMs: opts.latencyMs, errorRate: opts.errorRate, dropRate: opts.dropRate, streamErrorRate: opts.streamErrorRate },
        seed: opts.seed,
        profile: opts.profile,
        ...(opts.maxModelLen === undefined ? {} : { maxModelLen: opts.maxModelLen }),
        ...(opts.apiKey === undefined ? {} : { apiKey: opts.apiKey }),
        ...(opts.reasoning === undefined ? {} : { reasoning: opts.reasoning }),
      });
      const url = await server.start();
      io.stderr(`sim-server (a test double, not a model, behaving as ${opts.profile}) listening on ${url}; ${prompts.length} prompts known; Ctrl-C stops it\n`);
      await stopSignals().stopped;
      await server.close();
    });
  registerGradeCommand(program, io);
}
