import { defaultPlanOptions } from '../plan/options.js';
import type { ReplayRun } from '../replay/visits.js';
import { median, seedLabel } from '../report/series.js';
import type { Scenario } from '../simulate/scenario.js';
import { VERSION } from '../version.js';

type Rows = [string, string][];

const int = (v: number) => v.toLocaleString('en-US');

/** How our default runs, for the report's headline: the first round's bound named where it is not the default's. */
export function defaultDetail(rounds: number, freshCap = defaultPlanOptions.freshCap): string {
  const bound = freshCap === defaultPlanOptions.freshCap ? '' : freshCap === 0 ? ', no first-round bound' : `, first-round bound ${freshCap}`;
  return `value ${defaultPlanOptions.value}, ${rounds} round${rounds === 1 ? '' : 's'} a step${bound}`;
}

interface Common {
  readonly opts: { minN: number; maxN: number; rounds: number; freshCap: number; policies: string[]; stream?: string };
  readonly seeds: readonly number[];
  readonly command: string;
}

function common(c: Common): Rows {
  const d = defaultPlanOptions;
  return [
    ['min n, max n', `${c.opts.minN}, ${c.opts.maxN}`],
    ['rounds a step (ours, oracle)', String(c.opts.rounds)],
    // One round a step has no first round of several: its single-round plans value `balanced` without the linear term instead (README, "One plan a step").
    ['new prompts in a first round (ours)', c.opts.rounds === 1 ? 'no bound (one round a step: balanced in its single-round form)' : c.opts.freshCap === 0 ? 'no bound' : `at most ⌈${c.opts.freshCap} × its rollouts ÷ its prompts⌉`],
    ['data stream (refills, pools)', c.opts.stream ?? 'consumed'],
    [c.seeds.length > 1 ? 'seeds' : 'seed', `${seedLabel(c.seeds)}${c.seeds.length > 1 ? ` (${c.seeds.length} runs)` : ''}`],
    ['our default', `${d.policy} × ${d.value}, decay ${d.decay.forgetPerStep} / ${d.decay.reobserveDiscount}, saturation ${d.saturation}`],
    ['policies', c.opts.policies.join(', ')],
    ['rollout-budget', VERSION],
    ['command', c.command],
  ];
}

/** The replay report's settings box. */
export function replaySettings(c: Common & {
  log: string; format: string; run: ReplayRun; steps: readonly number[];
  opts: { budgetRollouts?: number; budgetTokens?: number };
}): Rows {
  const batch = c.steps.map((s) => c.run.counts(s).visits);
  const logged = c.steps.map((s) => c.run.counts(s).rollouts);
  const same = logged.every((r) => r === logged[0]);
  const rollouts = c.opts.budgetRollouts === undefined
    ? `the step's logged rollouts (${same ? int(logged[0] ?? 0) : `median ${int(median(logged))}`})`
    : int(c.opts.budgetRollouts);
  return [
    ['log', `${c.log} (format ${c.format})`],
    ['steps', `${c.steps[0]}..${c.steps.at(-1)} (${c.steps.length} steps; prompts a step: median ${median(batch)})`],
    ['rollout budget a step', rollouts],
    ['token budget a step', c.opts.budgetTokens === undefined ? 'none' : int(c.opts.budgetTokens)],
    ...common(c),
  ];
}

/** A scenario's hint model in words. */
function hintLabel(h: NonNullable<Scenario['hints']>): string {
  const from = h.samples === null ? 'exact reference pass rates' : `pass rates over ${h.samples} reference rollouts`;
  return `${Math.round(h.share * 100)}% of prompts; ${from}, logit shift ${h.shift}, slope ${h.slope}, noise sd ${h.noise}`;
}

/** The simulation report's settings box. */
export function simulateSettings(c: Common & { file: string; scenario: Scenario }): Rows {
  const s = c.scenario;
  return [
    ['scenario', `${c.file} (${s.name}: ${s.description})`],
    ['pool, batch, steps', `${int(s.prompts)} prompts, ${s.batch} a step, ${s.steps} steps`],
    ['rollout budget a step', `${int(s.budget.rollouts_per_prompt * s.batch)} (${s.budget.rollouts_per_prompt} a prompt)`],
    ['token budget a step', s.budget.tokens_per_prompt === null ? 'none' : `${int(s.budget.tokens_per_prompt * s.batch)} (${int(s.budget.tokens_per_prompt)} a prompt)`],
    ['length cap', s.length.cap === null ? 'none' : `${int(s.length.cap)} tokens`],
    ...(s.groups.length === 0 ? [] : [['groups (sources)', s.groups.map((g) => g.name).join(', ')] as [string, string]]),
    ['offline hints', s.hints === null ? 'none' : hintLabel(s.hints)],
    ...common(c),
  ];
}
