import { createReplayPolicyRegistry, replayEnvironment, runPolicies, type ReplayRun } from '../src/index.js';

/**
 * A results log of the given steps (in that order), 16 prompts a step from a pool of 40, 4
 * rollouts each, rewards 0 or 1 and token counts derived from the indices; every
 * third prompt's last two rollouts are logged after the step's other lines (a group split in
 * two). Returns the file's text.
 */
export function splitGroupLog(steps: readonly number[]): string {
  const lines: string[] = [];
  for (const step of steps) {
    const later: string[] = [];
    for (let b = 0; b < 16; b++) {
      const p = (step * 16 + b) % 40;
      for (let j = 0; j < 4; j++) {
        const reward = (p * 7 + j * 3 + step) % 5 < p % 4 ? 1 : 0;
        const l = JSON.stringify({ prompt_id: `p${p}`, step, reward, tokens: 100 + ((p * 31 + j * 17) % 900) });
        (j >= 2 && b % 3 === 0 ? later : lines).push(l);
      }
    }
    lines.push(...later);
  }
  return lines.join('\n');
}

/** Every replay policy but the oracle. */
export const replayPolicies = (): string[] => createReplayPolicyRegistry().names().filter((n) => n !== 'oracle');

/** The replay options both run tests use, for one data stream. */
export const replayOptions = (stream: 'consumed' | 'shared') => ({
  policies: replayPolicies(),
  registry: createReplayPolicyRegistry(),
  minN: 2,
  maxN: 16,
  seed: 3,
  stream,
  plan: { rounds: 2 },
});

/** A replay's results as JSON with its wall-clock planning times zeroed, to compare two runs. */
export const withoutTimes = (r: ReturnType<typeof runPolicies>): string =>
  JSON.stringify(r, (k, v) => (k === 'planMs' || k === 'plan_ms_per_step' ? 0 : v));

/** The metrics of every policy replayed over `run`, times zeroed. */
export const replayed = (run: ReplayRun, stream: 'consumed' | 'shared'): string =>
  withoutTimes(runPolicies(replayEnvironment(run), replayOptions(stream)));
