/**
 * TEST DOUBLE — the response model of the simulated inference server (`rollout-budget
 * sim-server`). It stands in for a GPU inference server (vLLM, SGLang) in tests and dry runs;
 * it generates no language, only responses with the statistics an RL step cares about:
 * correctness, length, finish reason, token ids.
 *
 * Per prompt: a pass rate p (the prompt's own `sim_pass_rate`, or a draw from Beta(α, β) keyed
 * by the prompt text; default α = 0.349, β = 0.693, the One-Shot-RLVR fit of
 * shared/CALIBRATION.md) and a prompt length effect u ~ N(0, sd_u). Per choice with seed s:
 * correct ~ Bernoulli(p); log L = a + b·p + c·correct + u + e, e ~ N(0, sd_e) (defaults: the
 * short-CoT Qwen-Math-Instruct fit of CALIBRATION.md). A response longer than max_tokens is cut
 * there (finish_reason "length") and loses its answer, so it is wrong. A correct response ends
 * in `\boxed{<ground truth>}`, a wrong one in a different boxed answer, so the math verifier
 * grades it. The same (prompt, seed) always gives the same response.
 */
import seedrandom from 'seedrandom';
import { betaDraw, type Random } from '../math/beta.js';
import { fnv1a } from '../math/hash.js';

export interface LengthModel {
  readonly a: number;
  readonly b: number;
  readonly c: number;
  readonly sdU: number;
  readonly sdE: number;
}

/** Short-CoT (Qwen-Math-Instruct on MATH) fit, CALIBRATION.md: p10/p50/p90 ≈ 221/346/553 tokens. */
export const SHORT_COT: LengthModel = { a: 6.118, b: -0.12, c: -0.146, sdU: 0.352, sdE: 0.183 };

export interface SimModelOptions {
  /** Beta(α, β) of pass rates for prompts without `sim_pass_rate`. */
  readonly passAlpha: number;
  readonly passBeta: number;
  readonly length: LengthModel;
  /** Server seed: mixes into every draw. */
  readonly seed: number;
}

export const defaultSimModel: SimModelOptions = { passAlpha: 0.349, passBeta: 0.693, length: SHORT_COT, seed: 0 };

/** A prompt the server knows: its ground truth and optional fixed pass rate. */
export interface SimPrompt {
  readonly id: string;
  readonly text: string;
  readonly groundTruth: string;
  readonly passRate?: number;
}

/** One simulated response: its tokens (each starts with a space) and how it ends. */
export interface SimResponse {
  readonly tokens: string[];
  readonly correct: boolean;
  /** The length the response would have without a max_tokens cut. */
  readonly fullLength: number;
}

function normal(random: Random): number {
  const u = Math.max(random(), 1e-12);
  return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * random());
}

const FILLER = [' we', ' have', ' so', ' then', ' the', ' value', ' is', ' by', ' step', ' thus', ' and', ' let'];

/** A wrong answer the math verifier rejects: truth + 1 for numbers, else "<truth>+1". */
export function wrongAnswer(truth: string): string {
  const t = truth.replace(/\s+/g, '');
  return /^-?\d+$/.test(t) ? String(Number(t) + 1) : `${t}+1`;
}

/** Token id of a simulated token: a stable hash into a 150k vocabulary. */
export function tokenId(token: string): number {
  return fnv1a(token) % 150_000;
}

export class SimModel {
  constructor(readonly options: SimModelOptions = defaultSimModel) {}

  /** The prompt's pass rate: its own, else a Beta draw keyed by (server seed, text). */
  passRate(prompt: SimPrompt | undefined, text: string): number {
    if (prompt?.passRate !== undefined) return prompt.passRate;
    const random = seedrandom(`p/${this.options.seed}/${text}`);
    return betaDraw(this.options.passAlpha, this.options.passBeta, random);
  }

  /**
   * The full response to `text` under choice seed `seed` (before any max_tokens cut).
   * O(length).
   */
  respond(prompt: SimPrompt | undefined, text: string, seed: number): SimResponse {
    const p = this.passRate(prompt, text);
    const u = normal(seedrandom(`u/${this.options.seed}/${text}`)) * this.options.length.sdU;
    const random = seedrandom(`r/${this.options.seed}/${text}/${seed}`);
    const correct = random() < p;
    const { a, b, c, sdE } = this.options.length;
    const length = Math.max(8, Math.round(Math.exp(a + b * p + c * (correct ? 1 : 0) + u + normal(random) * sdE)));
    const truth = (prompt?.groundTruth ?? String(fnv1a(text) % 1000)).replace(/\s+/g, '');
    const answer = correct ? truth : wrongAnswer(truth);
    const tail = [' The', ' answer', ' is', ` $\\boxed{${answer}}$.`]; // SIM_ANSWER_TOKENS
    const tokens: string[] = [];
    for (let i = 0; i < length - tail.length; i++) tokens.push(FILLER[Math.floor(random() * FILLER.length)]!);
    tokens.push(...tail);
    return { tokens, correct, fullLength: tokens.length };
  }
}

/** The closing sentence of every simulated response, in tokens (` The answer is $\\boxed{…}$.`): what follows the thinking. */
export const SIM_ANSWER_TOKENS = 4;

/** Tokens of a simulated text already generated (each simulated token starts with a space). */
export function countSimTokens(text: string): number {
  let n = 0;
  for (let i = 0; i < text.length; i++) if (text.charCodeAt(i) === 32) n++;
  return n;
}

/**
 * The most choices one request may ask of the test double. Each choice is drawn and held in
 * memory before the answer goes out, so `{"n": 1e9}` kept the server busy and growing until it
 * died; a plan's group is at most 4,096 (plan/limits.ts MAX_N_LIMIT), and the executor asks
 * for one group at most in a request (split further with `--request-n`).
 */
export const SIM_MAX_N = 4096;

/** The 400's message for a request asking more than SIM_MAX_N choices (n for each of `texts`). */
export function tooManyChoices(n: number, texts = 1): string {
  const asked = texts === 1 ? `got ${n}` : `got ${n} for each of ${texts} texts`;
  return `"n" must be at most ${SIM_MAX_N} choices a request (the sim-server's limit, a test double), ${asked}`;
}
