import { fnv1a, fnv1aAfter } from '../math/hash.js';

/** Largest group seed; seed + j stays a non-negative int32 for groups of up to 2^30 rollouts. */
const SEED_MASK = 0x3fffffff;

/**
 * The seed of a prompt's group in a plan: FNV-1a of "runSeed/step/promptId", 30 bits. Stable
 * under reordering or sharding of the plan; rollout j uses groupSeed + j.
 */
export function groupSeed(runSeed: number, step: number, promptId: string): number {
  return fnv1a(`${runSeed}/${step}/${promptId}`) & SEED_MASK;
}

/** groupSeed for the prompts of one plan: the run seed and step hashed once. */
export function groupSeeds(runSeed: number, step: number): (promptId: string) => number {
  const prefix = fnv1a(`${runSeed}/${step}/`);
  return (promptId) => fnv1aAfter(prefix, promptId) & SEED_MASK;
}

/** The group id a trainer keys a group by (verl `uid`, slime `group_index` lookup). */
export function groupId(step: number, promptId: string): string {
  return `${step}/${promptId}`;
}
