import { spawn } from 'node:child_process';
import { RolloutBudgetError, badInput, quote } from '../../errors.js';
import type { Verifier, VerifierFactory, VerifyItem } from './verifiers.js';

/** How long the check before generation waits for the command on empty input, ms. */
const PREFLIGHT_MS = 10_000;

/** Default wall-clock limit of one `command:` verifier batch, seconds (`--verifier-timeout`). */
export const DEFAULT_VERIFIER_TIMEOUT_S = 600;

/**
 * `command:<cmd>`: runs `sh -c <cmd>` once per batch in its own process group, writes one JSON
 * object per rollout to its stdin ({rollout_id, prompt_id, prompt, response, finish_reason,
 * ground_truth?}), and reads one reward per line from its stdout (a number, true/false, or
 * {"reward": x}), in order. A batch that runs past `timeoutMs` (default 600 s) has its whole
 * process group killed (SIGKILL) and fails with a message naming the limit; nothing is written.
 */
export const commandVerifier: VerifierFactory = (cmd, options = {}) => {
  if (cmd === undefined || cmd.trim() === '') throw new RolloutBudgetError('BAD_OPTION', '--verifier command:<cmd> needs a command after "command:"');
  const timeoutMs = options.timeoutMs ?? DEFAULT_VERIFIER_TIMEOUT_S * 1000;
  const verifier: Verifier = {
    name: `command:${cmd}`,
    check: () => undefined,
    verify: (items) => runCommand(cmd, items, timeoutMs),
    preflight: async () => {
      // Once on empty input, before any generation: only a command the shell cannot start
      // (127: not found, 126: not executable) is refused. A grader may fail on no rollouts, or
      // wait (json.loads(sys.stdin.readline())): that is its own business, not an error here.
      let run: Finished;
      try {
        run = await spawnBatch(cmd, '', Math.min(timeoutMs, PREFLIGHT_MS));
      } catch {
        return; // still running after PREFLIGHT_MS: it started
      }
      if (run.code === 126 || run.code === 127) {
        throw new RolloutBudgetError('BAD_OPTION', `--verifier command:${cmd}: the shell cannot run it (exit ${run.code}${run.stderr.trim() === '' ? '' : `: ${run.stderr.trim().slice(0, 300)}`}); checked before any generation`);
      }
    },
  };
  return verifier;
};

interface Finished {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** Runs the command on one batch; rejects on a timeout (after killing its process group). */
function spawnBatch(cmd: string, input: string, timeoutMs: number): Promise<Finished> {
  return new Promise((resolve, reject) => {
    // detached: the shell leads a new process group, so a timeout kills it and every child it started.
    const child = spawn('sh', ['-c', cmd], { stdio: ['pipe', 'pipe', 'pipe'], detached: true });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    let settled = false;
    const killGroup = () => {
      try {
        if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
      } catch {
        // already gone
      }
    };
    const cleanup = () => {
      clearTimeout(timer);
      process.removeListener('exit', killGroup);
    };
    const timer = setTimeout(() => {
      if (settled) return;
      settled = true;
      cleanup();
      killGroup();
      child.stdout.destroy();
      child.stderr.destroy();
      const seconds = Math.round(timeoutMs) / 1000;
      reject(new RolloutBudgetError('IO_ERROR', `verifier ${quote(cmd)} did not finish within ${seconds} s (--verifier-timeout); its process group was killed and nothing was written`, 1));
    }, timeoutMs);
    process.once('exit', killGroup);
    child.stdout.on('data', (b: Buffer) => out.push(b));
    child.stderr.on('data', (b: Buffer) => err.push(b));
    child.on('error', (error) => {
      if (settled) return;
      settled = true;
      cleanup();
      reject(new RolloutBudgetError('IO_ERROR', `verifier ${quote(cmd)} could not start (${error.message})`, 1));
    });
    child.on('close', (code, signal) => {
      if (settled) return;
      settled = true;
      cleanup();
      resolve({ code, signal, stdout: Buffer.concat(out).toString('utf8'), stderr: Buffer.concat(err).toString('utf8') });
    });
    child.stdin.on('error', () => undefined); // a verifier that exits early: reported by its exit code
    child.stdin.end(input);
  });
}

async function runCommand(cmd: string, items: readonly VerifyItem[], timeoutMs: number): Promise<number[]> {
  if (items.length === 0) return [];
  const input = items
    .map((it) =>
      JSON.stringify({
        rollout_id: it.rollout_id,
        prompt_id: it.prompt_id,
        prompt: it.input ?? it.prompt.prompt ?? it.prompt.messages ?? null,
        response: it.response,
        finish_reason: it.finish_reason,
        ...(it.prompt.ground_truth === undefined ? {} : { ground_truth: it.prompt.ground_truth }),
      }),
    )
    .join('\n');
  const { code, signal, stdout, stderr } = await spawnBatch(cmd, `${input}\n`, timeoutMs);
  const where = `verifier ${quote(cmd)}`;
  if (code !== 0) throw new RolloutBudgetError('IO_ERROR', `${where} exited with ${code ?? signal}: ${stderr.trim().slice(0, 300)}`, 1);
  const lines = stdout.split('\n').map((l) => l.trim()).filter((l) => l !== '');
  if (lines.length !== items.length) {
    throw badInput(where, `printed ${lines.length} rewards for ${items.length} rollouts; it must print one line per input line`);
  }
  return lines.map((line, i) => {
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch {
      throw badInput(`${where} stdout:${i + 1}`, `"reward" must be a number in [0, 1], got ${quote(line)}`);
    }
    if (value !== null && typeof value === 'object' && 'reward' in value) value = (value as { reward: unknown }).reward;
    if (typeof value === 'boolean') return value ? 1 : 0;
    if (typeof value !== 'number' || !Number.isFinite(value) || value < 0 || value > 1) {
      throw badInput(`${where} stdout:${i + 1}`, `"reward" must be a number in [0, 1], got ${quote(value)}`);
    }
    return value;
  });
}
