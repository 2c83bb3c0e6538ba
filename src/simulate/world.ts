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
}

/** The initial pool, a pure function of the scenario (and its seed). */
function makePool(s: Scenario): Pool {
  const random = seedrandom(`pool/${s.seed}`);
  const ids = Array.from({ length: s.prompts }, (_, i) => `s${i}`);
  const z0 = new Float64Array(s.prompts);
  const u = new Float64Array(s.prompts);
  for (let i = 0; i < s.prompts; i++) {
    const p = Math.min(0.999, Math.max(0.001, betaDraw(s.difficulty.alpha, s.difficulty.beta, random)));
    z0[i] = random() < s.difficulty.unsolvable ? -Infinity : logit(p);
    u[i] = s.length.sd_u * normal(random);
  }
  return { ids, z0, u };
}

/**
 * A closed-loop simulated pool as an environment. Every epoch the pool is shuffled (seeded by
 * scenario seed and epoch) and cut into batches. Each policy gets its own world (fork), where
 * the pass rate p = σ(z) of a prompt rises by `learning_rate` on the logit for each group with
 * reward variance it is trained on and every prompt's by `transfer` a step; unsolvable prompts
 * stay at 0. A rollout is correct with probability p; its length is
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
        .map((i) => (cap === null ? { id: pool.ids[i]! } : { id: pool.ids[i]!, max_tokens: cap }));
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
