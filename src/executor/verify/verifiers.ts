import { spawn } from 'node:child_process';
import { RolloutBudgetError, badInput, quote } from '../../errors.js';
import { createRegistry, type Registry } from '../../registry.js';
import { mathReward } from './math.js';

/** One finished rollout to grade. */
export interface VerifyItem {
  readonly rollout_id: string;
  readonly prompt_id: string;
  /** The prompt line as given (prompt or messages, ground_truth, any extra fields). */
  readonly prompt: Readonly<Record<string, unknown>>;
  readonly response: string;
  readonly finish_reason: string;
  /** What was sent: the prompt text or the messages (default: the prompt's "prompt" or "messages"). */
  readonly input?: string | readonly unknown[] | null;
}

/** Grades a batch of rollouts; resolves to one reward in [0, 1] per item, in order. */
export interface Verifier {
  readonly name: string;
  /** Checks the prompts before any generation; throws naming the prompt. */
  check(prompt: Readonly<Record<string, unknown>>, where: string): void;
  verify(items: readonly VerifyItem[]): Promise<number[]>;
}

/** A verifier factory; `arg` is what follows "name:" in `--verifier name:arg`. */
export type VerifierFactory = (arg: string | undefined) => Verifier;

/** `math`: the last \boxed{} answer against the prompt's `ground_truth` (see math.ts). */
export const mathVerifier: VerifierFactory = () => ({
  name: 'math',
  check(prompt, where) {
    const gt = prompt.ground_truth;
    if (typeof gt !== 'string' && typeof gt !== 'number') {
      throw badInput(where, `the math verifier needs "ground_truth" (a string or number), got ${quote(gt)}`);
    }
  },
  verify: async (items) => items.map((it) => mathReward(it.response, String(it.prompt.ground_truth))),
});

/**
 * `command:<cmd>`: runs `sh -c <cmd>` once per batch, writes one JSON object per rollout to its
 * stdin ({rollout_id, prompt_id, prompt, response, finish_reason, ground_truth?}), and reads
 * one reward per line from its stdout (a number, true/false, or {"reward": x}), in order.
 */
export const commandVerifier: VerifierFactory = (cmd) => {
  if (cmd === undefined || cmd.trim() === '') throw new RolloutBudgetError('BAD_OPTION', '--verifier command:<cmd> needs a command after "command:"');
  return {
    name: `command:${cmd}`,
    check: () => undefined,
    verify: (items) => runCommand(cmd, items),
  };
};

async function runCommand(cmd: string, items: readonly VerifyItem[]): Promise<number[]> {
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
  const { code, stdout, stderr } = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve, reject) => {
    const child = spawn('sh', ['-c', cmd], { stdio: ['pipe', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (b: Buffer) => out.push(b));
    child.stderr.on('data', (b: Buffer) => err.push(b));
    child.on('error', reject);
    child.on('close', (c) => resolve({ code: c, stdout: Buffer.concat(out).toString('utf8'), stderr: Buffer.concat(err).toString('utf8') }));
    child.stdin.on('error', () => undefined); // a verifier that exits early: reported by its exit code
    child.stdin.end(`${input}\n`);
  });
  const where = `verifier ${quote(cmd)}`;
  if (code !== 0) throw new RolloutBudgetError('IO_ERROR', `${where} exited with ${code}: ${stderr.trim().slice(0, 300)}`, 1);
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

export function createVerifierRegistry(): Registry<VerifierFactory> {
  return createRegistry<VerifierFactory>('verifier', { math: mathVerifier, command: commandVerifier });
}

/** Builds a verifier from `name` or `name:arg` (e.g. "math", "command:python3 grade.py"). */
export function verifierFrom(spec: string, registry: Registry<VerifierFactory> = createVerifierRegistry()): Verifier {
  const colon = spec.indexOf(':');
  const name = colon < 0 ? spec : spec.slice(0, colon);
  return registry.get(name)(colon < 0 ? undefined : spec.slice(colon + 1));
}
