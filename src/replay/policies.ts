import { defaultPlanOptions } from '../plan/options.js';
import { createPosteriorPolicyRegistry } from '../plan/policies.js';
import { createRegistry, type Registry } from '../registry.js';
import { dapoPolicy } from './baselines/dapo.js';
import { gresoPolicy } from './baselines/greso.js';
import { knapsackRlPolicy } from './baselines/knapsack-rl.js';
import { moppsPolicy } from './baselines/mopps.js';
import { uniformPolicy } from './baselines/uniform.js';
import { xrpoPolicy } from './baselines/xrpo.js';
import { oraclePolicy, ourPolicy } from './ours.js';
import type { ReplayPolicy } from './types.js';

/** The baselines, in the order the report shows them. */
export const baselineNames = ['uniform', 'dapo', 'greso', 'knapsack-rl', 'mopps', 'xrpo'] as const;

/**
 * Every allocation strategy replay and simulate can score (`--policies`), one signature for
 * all: the published baselines, ours with each posterior policy (bayes, thompson, mean:
 * planned by planStep from the strategy's own memory state), plus `oracle` (simulation only).
 * A strategy decides a whole step; a posterior policy (plan/policies.ts) is one input of ours.
 */
export function createReplayPolicyRegistry(): Registry<ReplayPolicy> {
  const registry = createRegistry<ReplayPolicy>('replay policy');
  for (const name of baselineNames) {
    registry.register(name, { uniform: uniformPolicy, dapo: dapoPolicy, greso: gresoPolicy, 'knapsack-rl': knapsackRlPolicy, mopps: moppsPolicy, xrpo: xrpoPolicy }[name]);
  }
  const ours = createPosteriorPolicyRegistry();
  for (const name of ours.names()) registry.register(name, ourPolicy(name, `ours: ${ours.get(name).description}`));
  registry.register('oracle', oraclePolicy);
  return registry;
}

/** The default strategy list: the baselines and ours with the default posterior policy. */
export function defaultPolicyList(): string[] {
  return [...baselineNames, defaultPlanOptions.policy];
}
