import { badInput, quote } from '../../errors.js';
import { createRegistry, type Registry } from '../../registry.js';
import { commandVerifier } from './command.js';
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
  /**
   * Checks that the verifier runs at all, before any generation (command: runs on no rollouts
   * at all: a command that cannot start failed only after the whole step was generated).
   */
  preflight?(): Promise<void>;
}

/** Settings every verifier factory receives (entries use what applies to them). */
export interface VerifierOptions {
  /** Wall-clock limit of one batch of an external verifier, ms (command:). */
  readonly timeoutMs?: number;
}

/** A verifier factory; `arg` is what follows "name:" in `--verifier name:arg`. */
export type VerifierFactory = (arg: string | undefined, options?: VerifierOptions) => Verifier;

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

export function createVerifierRegistry(): Registry<VerifierFactory> {
  return createRegistry<VerifierFactory>('verifier', { math: mathVerifier, command: commandVerifier });
}

/** Builds a verifier from `name` or `name:arg` (e.g. "math", "command:python3 grade.py"). */
export function verifierFrom(spec: string, registry: Registry<VerifierFactory> = createVerifierRegistry(), options: VerifierOptions = {}): Verifier {
  const colon = spec.indexOf(':');
  const name = colon < 0 ? spec : spec.slice(0, colon);
  return registry.get(name)(colon < 0 ? undefined : spec.slice(colon + 1), options);
}

export { commandVerifier };
