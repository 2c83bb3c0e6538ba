import { defaultPlanOptions } from '../plan/options.js';
import { createPolicyRegistry } from '../plan/policies.js';
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
 * Every policy replay and simulate can score, one signature for all: our planner's policies
 * (bayes, thompson, mean: planned by planStep from the policy's own memory state) and the
 * published baselines, plus `oracle` (simulation only).
 */
export function createReplayPolicyRegistry(): Registry<ReplayPolicy> {
  const registry = createRegistry<ReplayPolicy>('replay policy');
  for (const name of baselineNames) {
    registry.register(name, { uniform: uniformPolicy, dapo: dapoPolicy, greso: gresoPolicy, 'knapsack-rl': knapsackRlPolicy, mopps: moppsPolicy, xrpo: xrpoPolicy }[name]);
  }
  const ours = createPolicyRegistry();
  for (const name of ours.names()) registry.register(name, ourPolicy(name, `ours: ${ours.get(name).description}`));
  registry.register('oracle', oraclePolicy);
  return registry;
}

/** The default policy list: the baselines and our default policy. */
export function defaultPolicyList(): string[] {
  return [...baselineNames, defaultPlanOptions.policy];
}
