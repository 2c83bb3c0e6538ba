import seedrandom from 'seedrandom';
import { betaDraw, type Random } from '../math/beta.js';
import type { Candidate } from '../plan/types.js';
import type { Environment, GroupDrawer, GroupOutcome, World } from '../replay/types.js';
import { hasVariance } from '../replay/metrics.js';
import type { Scenario } from './scenario.js';

const logit = (p: number) => Math.log(p / (1 - p));
const sigmoid = (z: number) => 1 / (1 + Math.exp(-z));

function normal(random: Random): number {
  let u = random();
  while (u <= 0) u = random();
  return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * random());
}

interface Pool {
  ids: string[];
  /** Initial logits (−Infinity for unsolvable prompts). */
  z0: Float64Array;
  /** Per-prompt length offset u_prompt. */
  u: Float64Array;
  /** What the data loader offers for each prompt: id, and group, hint and cap when the scenario has them. */
  candidates: Candidate[];
}

/** The initial pool, a pure function of the scenario (and its seed). */
function makePool(s: Scenario): Pool {
  const random = seedrandom(`pool/${s.seed}`);
  const ids = Array.from({ length: s.prompts }, (_, i) => `s${i}`);
  const z0 = new Float64Array(s.prompts);
  const u = new Float64Array(s.prompts);
  const groups = s.groups;
  const total = groups.reduce((t, g) => t + g.share, 0);
  const groupOf = new Int32Array(s.prompts).fill(-1);
  for (let i = 0; i < s.prompts; i++) {
    let difficulty = s.difficulty;
    if (groups.length > 0) {
      // By share, as a data set's sources are mixed (a seeded draw per prompt).
      let at = random() * total;
      let g = 0;
      while (g < groups.length - 1 && at >= groups[g]!.share) at -= groups[g++]!.share;
      groupOf[i] = g;
      difficulty = groups[g]!.difficulty;
    }
    const p = Math.min(0.999, Math.max(0.001, betaDraw(difficulty.alpha, difficulty.beta, random)));
    z0[i] = random() < difficulty.unsolvable ? -Infinity : logit(p);
    u[i] = s.length.sd_u * normal(random);
  }
  const hints = hintsOf(s, z0, groupOf);
  const candidates = ids.map((id, i): Candidate => ({
    id,
    ...(s.length.cap === null ? {} : { max_tokens: s.length.cap }),
    ...(groupOf[i]! < 0 ? {} : { group: groups[groupOf[i]!]!.name }),
    ...(hints[i] === undefined ? {} : hints[i]),
  }));
  return { ids, z0, u, candidates };
}

/**
 * Each prompt's offline hint (scenario.ts HintModel), from its own seeded stream so that a
 * scenario's pool does not depend on its hints: a reference model's pass rate
 * σ(shift + group shift + slope·z + noise·ε) measured over `samples` rollouts.
 */
function hintsOf(s: Scenario, z0: Float64Array, groupOf: Int32Array): ({ prior_pass_rate: number; prior_samples?: number } | undefined)[] {
  const h = s.hints;
  if (h === null) return [];
  const random = seedrandom(`hints/${s.seed}`);
  return Array.from(z0, (z, i) => {
    const carries = random() < h.share;
    const shift = h.shift + (groupOf[i]! < 0 ? 0 : s.groups[groupOf[i]!]!.hint_shift);
    const ref = sigmoid(shift + h.slope * (z === -Infinity ? logit(0.001) : z) + h.noise * normal(random));
    if (h.samples === null) return carries ? { prior_pass_rate: ref } : undefined;
    let k = 0;
    for (let j = 0; j < h.samples; j++) if (random() < ref) k++;
    return carries ? { prior_pass_rate: k / h.samples, prior_samples: h.samples } : undefined;
  });
}

/**
 * A closed-loop simulated pool as an environment. Every epoch the pool is shuffled (seeded by
 * scenario seed and epoch) and cut into batches. Each policy gets its own world (fork), where
 * the pass rate p = σ(z) of a prompt rises by `learning_rate` on the logit for each group with
 * reward variance it is trained on and every prompt's by `transfer` a step; unsolvable prompts
 * stay at 0. With `groups`, each prompt's difficulty comes from its source, and its candidate
 * carries the source as `group`; with `hints`, candidates carry `prior_pass_rate` (and
 * `prior_samples`). A rollout is correct with probability p; its length is
 * L = exp(a + b·p + c·correct + u_prompt + e), e ~ N(0, sd_e²), clipped at the cap, and a
 * clipped rollout is wrong (CALIBRATION.md).
 */
export function simulatedEnvironment(s: Scenario): Environment {
  const pool = makePool(s);
  const index = new Map(pool.ids.map((id, i) => [id, i]));
  const perEpoch = Math.floor(s.prompts / s.batch);
  const orders = new Map<number, number[]>();
  const orderOf = (epoch: number): number[] => {
    let order = orders.get(epoch);
    if (order === undefined) {
      const random = seedrandom(`epoch/${s.seed}/${epoch}`);
      order = pool.ids.map((_, i) => i);
      for (let i = order.length - 1; i > 0; i--) {
        const j = Math.floor(random() * (i + 1));
        [order[i], order[j]] = [order[j]!, order[i]!];
      }
      orders.set(epoch, order);
    }
    return order;
  };
  const cap = s.length.cap;
  const steps = Array.from({ length: s.steps }, (_, i) => i);
  return {
    kind: 'simulate',
    steps,
    batch(step): Candidate[] {
      const epoch = Math.floor(step / perEpoch);
      const at = (step % perEpoch) * s.batch;
      return orderOf(epoch)
        .slice(at, at + s.batch)
        .map((i) => pool.candidates[i]!);
    },
    defaultBudget: () => ({
      rollouts: s.budget.rollouts_per_prompt * s.batch,
      ...(s.budget.tokens_per_prompt === null ? {} : { tokens: Math.round(s.budget.tokens_per_prompt * s.batch) }),
    }),
    fork(): World {
      const z = Float64Array.from(pool.z0);
      const p = (i: number) => (z[i] === -Infinity ? 0 : sigmoid(z[i]!));
      return {
        drawer(_step, _source, id, random): GroupDrawer {
          const i = index.get(id)!;
          const pi = p(i);
          return {
            next() {
              let correct = random() < pi ? 1 : 0;
              let tokens = Math.exp(s.length.a + s.length.b * pi + s.length.c * correct + pool.u[i]! + s.length.sd_e * normal(random));
              if (cap !== null && tokens >= cap) {
                tokens = cap;
                correct = 0;
              }
              return { reward: correct, tokens: Math.max(1, Math.round(tokens)), modelled: true };
            },
          };
        },
        passRate: (_source, id) => p(index.get(id)!),
        truth: (ids) => Float64Array.from(ids, (id) => p(index.get(id)!)),
        train(_step, groups: readonly GroupOutcome[]) {
          for (const g of groups) {
            const i = index.get(g.prompt_id)!;
            if (hasVariance(g.rewards) && z[i] !== -Infinity) z[i]! += s.drift.learning_rate;
          }
          for (let i = 0; i < z.length; i++) if (z[i] !== -Infinity) z[i]! += s.drift.transfer;
        },
      };
    },
  };
}
