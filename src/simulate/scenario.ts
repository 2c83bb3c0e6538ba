import { badInput, quote } from '../errors.js';
import { parseJson } from '../io/jsonl.js';

/**
 * A simulation scenario (fixtures/scenarios/*.json). Defaults come from measured public data
 * (shared CALIBRATION.md): difficulty Beta fits of k-of-8 counts, an unsolvable share of about
 * 8%, drift of the One-Shot-RLVR run (pool mean logit +0.0012 a step) and the response-length
 * model log L = a + b·p + c·correct + u_prompt + e, clipped at the cap (a clipped response is wrong).
 */
export interface Scenario {
  readonly name: string;
  readonly description: string;
  /** Prompts in the pool, prompts per step, steps. */
  readonly prompts: number;
  readonly batch: number;
  readonly steps: number;
  readonly seed: number;
  /** Per-step budget: rollouts = rollouts_per_prompt × batch; tokens likewise when set. */
  readonly budget: { readonly rollouts_per_prompt: number; readonly tokens_per_prompt: number | null };
  /** Initial pass rate ~ Beta(alpha, beta); a share `unsolvable` has pass rate 0 for the whole run. */
  readonly difficulty: { readonly alpha: number; readonly beta: number; readonly unsolvable: number };
  /**
   * Training moves a prompt's logit by `learning_rate` for every group with reward variance
   * it is trained on, and every prompt's logit by `transfer` each step (generalisation).
   */
  readonly drift: { readonly learning_rate: number; readonly transfer: number };
  readonly length: {
    readonly a: number;
    readonly b: number;
    readonly c: number;
    readonly sd_u: number;
    readonly sd_e: number;
    readonly cap: number | null;
  };
  /**
   * Sources of different difficulty (empty: one pool with `difficulty`). Each prompt belongs to
   * one, drawn by `share`; its candidates carry the name as `group`.
   */
  readonly groups: readonly ScenarioGroup[];
  /** Offline difficulty hints the candidates carry (`prior_pass_rate`), or null for none. */
  readonly hints: HintModel | null;
}

export interface ScenarioGroup {
  readonly name: string;
  /** Share of the pool (the shares are normalised to sum to 1). */
  readonly share: number;
  readonly difficulty: Scenario['difficulty'];
  /** Added to the hints' logit shift for this source (a reference model better or worse on it). */
  readonly hint_shift: number;
}

/**
 * How hints are made: a reference model, different from the trained one, has pass rate
 * p_ref = σ(shift + slope·z + noise·ε), ε ~ N(0, 1), with z the prompt's initial logit (an
 * unsolvable prompt counts as p = 0.001); the hint is its pass rate over `samples` rollouts
 * (k/samples, k ~ Binomial(samples, p_ref)), or p_ref itself when `samples` is null. A share
 * `share` of the prompts carry one. slope 0 is a hint of pure noise.
 */
export interface HintModel {
  readonly share: number;
  readonly samples: number | null;
  readonly shift: number;
  readonly slope: number;
  readonly noise: number;
}

/** One-Shot-RLVR first visits (CALIBRATION.md): α = 0.349, β = 0.693. */
const rlMathDifficulty = { alpha: 0.349, beta: 0.693, unsolvable: 0.08 };
/**
 * Drift calibrated so that a uniform-8 run on the RL math pool raises the pool's mean logit
 * by about 0.0012 a step (One-Shot-RLVR, 500 steps: 0.348 → 0.485): with ~56% mixed groups and
 * a visit every ~8 steps, 0.015 per informative group plus 0.0004 a step of transfer.
 */
const defaultDrift = { learning_rate: 0.015, transfer: 0.0004 };
/** Short-CoT lengths (Qwen-Math-Instruct on MATH, CALIBRATION.md), capped at One-Shot-RLVR's 3072. */
const shortCot = { a: 6.118, b: -0.12, c: -0.146, sd_u: 0.352, sd_e: 0.183, cap: 3072 };

export const defaultScenario: Scenario = {
  name: 'default',
  description: 'RL math pool',
  prompts: 512,
  batch: 64,
  steps: 200,
  seed: 0,
  budget: { rollouts_per_prompt: 8, tokens_per_prompt: null },
  difficulty: rlMathDifficulty,
  drift: defaultDrift,
  length: shortCot,
  groups: [],
  hints: null,
};

function num(where: string, obj: Record<string, unknown>, key: string, fallback: number, lo: number, hi: number, int = false): number {
  const v = obj[key];
  if (v === undefined) return fallback;
  if (typeof v !== 'number' || !Number.isFinite(v) || v < lo || v > hi || (int && !Number.isSafeInteger(v))) {
    throw badInput(where, `"${key}" must be ${int ? 'an integer' : 'a number'} in [${lo}, ${hi}], got ${quote(v)}`);
  }
  return v;
}

function section(where: string, obj: Record<string, unknown>, key: string): Record<string, unknown> {
  const v = obj[key];
  if (v === undefined) return {};
  if (v === null || typeof v !== 'object' || Array.isArray(v)) throw badInput(where, `"${key}" must be an object, got ${quote(v)}`);
  return v as Record<string, unknown>;
}

/** The fields each object of a scenario takes. */
const FIELDS = {
  top: ['name', 'description', 'prompts', 'batch', 'steps', 'seed', 'budget', 'difficulty', 'drift', 'length', 'groups', 'hints'],
  budget: ['rollouts_per_prompt', 'tokens_per_prompt'],
  difficulty: ['alpha', 'beta', 'unsolvable'],
  drift: ['learning_rate', 'transfer'],
  length: ['a', 'b', 'c', 'sd_u', 'sd_e', 'cap'],
  group: ['name', 'share', 'difficulty', 'hint_shift'],
  hints: ['share', 'samples', 'shift', 'slope', 'noise'],
} as const;

/**
 * A warning for each field of `obj` a scenario does not take: a misspelt field would otherwise
 * leave its default in place unnoticed. Not an error, so that files with fields of their own
 * (notes, provenance) still run.
 */
function unknownFields(where: string, obj: Record<string, unknown>, known: readonly string[], warnings: string[] | undefined): void {
  if (warnings === undefined) return;
  for (const key of Object.keys(obj)) {
    if (!known.includes(key)) warnings.push(`${where}: unknown field ${quote(key)} ignored (a misspelt field leaves the one meant at its default); expected one of ${known.join(', ')}`);
  }
}

/**
 * Parses and validates a scenario file's text; missing fields take the defaults above.
 * `warnings`, when given, receives a line for each field the scenario does not take.
 */
export function parseScenario(text: string, name: string, warnings?: string[]): Scenario {
  // The nesting limit of every file we read (io/jsonl.ts parseJson): a scenario is shallow.
  const value = parseJson(text, name);
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw badInput(name, `a scenario must be a JSON object, got ${quote(value)}`);
  const o = value as Record<string, unknown>;
  const d = defaultScenario;
  const b = section(name, o, 'budget');
  const diff = section(name, o, 'difficulty');
  const drift = section(name, o, 'drift');
  const len = section(name, o, 'length');
  unknownFields(name, o, FIELDS.top, warnings);
  unknownFields(`${name}: budget`, b, FIELDS.budget, warnings);
  unknownFields(`${name}: difficulty`, diff, FIELDS.difficulty, warnings);
  unknownFields(`${name}: drift`, drift, FIELDS.drift, warnings);
  unknownFields(`${name}: length`, len, FIELDS.length, warnings);
  const prompts = num(name, o, 'prompts', d.prompts, 1, 1e7, true);
  const tokensPerPrompt = b.tokens_per_prompt === undefined || b.tokens_per_prompt === null ? null : num(`${name}: budget`, b, 'tokens_per_prompt', 0, 1, 1e9);
  const cap = len.cap === undefined ? d.length.cap : len.cap === null ? null : num(`${name}: length`, len, 'cap', 0, 1, 1e7, true);
  const difficulty = {
    alpha: num(`${name}: difficulty`, diff, 'alpha', d.difficulty.alpha, 1e-3, 1e3),
    beta: num(`${name}: difficulty`, diff, 'beta', d.difficulty.beta, 1e-3, 1e3),
    unsolvable: num(`${name}: difficulty`, diff, 'unsolvable', d.difficulty.unsolvable, 0, 1),
  };
  return {
    name: typeof o.name === 'string' ? o.name : name,
    description: typeof o.description === 'string' ? o.description : '',
    prompts,
    batch: num(name, o, 'batch', Math.min(d.batch, prompts), 1, prompts, true),
    steps: num(name, o, 'steps', d.steps, 1, 1e6, true),
    seed: num(name, o, 'seed', d.seed, 0, 2 ** 31 - 1, true),
    budget: { rollouts_per_prompt: num(`${name}: budget`, b, 'rollouts_per_prompt', d.budget.rollouts_per_prompt, 1, 1e4, true), tokens_per_prompt: tokensPerPrompt },
    difficulty,
    drift: {
      learning_rate: num(`${name}: drift`, drift, 'learning_rate', d.drift.learning_rate, 0, 10),
      transfer: num(`${name}: drift`, drift, 'transfer', d.drift.transfer, -1, 1),
    },
    length: {
      // log L: a response of e^15 (3.3M) tokens is already far past any model's context.
      a: num(`${name}: length`, len, 'a', d.length.a, -10, 15),
      b: num(`${name}: length`, len, 'b', d.length.b, -10, 10),
      c: num(`${name}: length`, len, 'c', d.length.c, -10, 10),
      sd_u: num(`${name}: length`, len, 'sd_u', d.length.sd_u, 0, 10),
      sd_e: num(`${name}: length`, len, 'sd_e', d.length.sd_e, 0, 10),
      cap,
    },
    groups: groupsOf(name, o.groups, difficulty, warnings),
    hints: o.hints === undefined || o.hints === null ? null : hintsOf(`${name}: hints`, section(name, o, 'hints'), warnings),
  };
}

/** The scenario's sources; a field a group's difficulty leaves out is the scenario's own (`top`). */
function groupsOf(name: string, value: unknown, top: Scenario['difficulty'], warnings: string[] | undefined): ScenarioGroup[] {
  if (value === undefined) return [];
  if (!Array.isArray(value) || value.length === 0) throw badInput(name, `"groups" must be a non-empty array of sources, got ${quote(value)}`);
  const seen = new Set<string>();
  return value.map((g, i) => {
    const where = `${name}: groups[${i}]`;
    if (g === null || typeof g !== 'object' || Array.isArray(g)) throw badInput(where, `each group must be an object, got ${quote(g)}`);
    const o = g as Record<string, unknown>;
    if (typeof o.name !== 'string' || o.name === '') throw badInput(where, `"name" must be a non-empty string, got ${quote(o.name)}`);
    if (seen.has(o.name)) throw badInput(where, `"name" ${quote(o.name)} repeats an earlier group`);
    seen.add(o.name);
    if (o.share === undefined) throw badInput(where, '"share" is required (the share of the pool), got nothing');
    const diff = section(where, o, 'difficulty');
    unknownFields(where, o, FIELDS.group, warnings);
    unknownFields(`${where}: difficulty`, diff, FIELDS.difficulty, warnings);
    const d = top;
    return {
      name: o.name,
      share: num(where, o, 'share', 1, 1e-6, 1e6),
      difficulty: {
        alpha: num(`${where}: difficulty`, diff, 'alpha', d.alpha, 1e-3, 1e3),
        beta: num(`${where}: difficulty`, diff, 'beta', d.beta, 1e-3, 1e3),
        unsolvable: num(`${where}: difficulty`, diff, 'unsolvable', d.unsolvable, 0, 1),
      },
      hint_shift: num(where, o, 'hint_shift', 0, -20, 20),
    };
  });
}

function hintsOf(where: string, o: Record<string, unknown>, warnings: string[] | undefined): HintModel {
  unknownFields(where, o, FIELDS.hints, warnings);
  const samples = o.samples === null ? null : num(where, o, 'samples', 16, 1, 1e6, true);
  return {
    share: num(where, o, 'share', 1, 0, 1),
    samples,
    shift: num(where, o, 'shift', 0, -20, 20),
    slope: num(where, o, 'slope', 1, -20, 20),
    noise: num(where, o, 'noise', 0, 0, 20),
  };
}
