// Quirks of users' own logs found by replaying past runs as a user would:
// - a results log that repeats a rollout_id within its step (a crash can write a resumed rollout
//   twice: docs/executor.md) was counted twice by replay, while observe counts it once;
// - with some token counts missing and a token budget, a step that could not be checked counted
//   as within budget: a policy spending 3× the budget read "within budget 1.000";
// - a logged step above 2^31 − 1 was refused as a "--step" the user never gave.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { cli } from './cli-helpers.js';
import { tempDir } from './temp.js';

/** Results lines: 4 prompts × 4 rollouts at each of `steps` steps, prompt p with p successes. */
function lines(steps: number, extra: (row: Record<string, unknown>, k: number) => Record<string, unknown> = (r) => r): Record<string, unknown>[] {
  const rows: Record<string, unknown>[] = [];
  let k = 0;
  for (let s = 0; s < steps; s++) {
    for (let p = 0; p < 4; p++) {
      for (let j = 0; j < 4; j++) rows.push(extra({ prompt_id: `p${p}`, step: s, rollout_id: `${s}/p${p}#${j}`, reward: j < p ? 1 : 0 }, k++));
    }
  }
  return rows;
}

const write = (file: string, rows: readonly Record<string, unknown>[]) => writeFileSync(file, rows.map((r) => JSON.stringify(r)).join('\n') + '\n');

describe('replaying a log with quirks', () => {
  it('a rollout_id repeated within its step is counted once, as observe counts it, with a warning; in step order or not', async () => {
    const dir = tempDir('rb-quirks-');
    const once = lines(3);
    const twice = [...once, ...once.filter((r) => r.step === 1)].sort((a, b) => (a.step as number) - (b.step as number));
    write(join(dir, 'once.jsonl'), once);
    write(join(dir, 'twice.jsonl'), twice);
    write(join(dir, 'shuffled.jsonl'), [...twice].reverse()); // not in step order: read packed
    const metrics = async (name: string) => {
      const r = await cli(['replay', '--log', join(dir, name), '--policies', 'uniform,bayes', '--quiet', '--out', join(dir, `out-${name}`)]);
      expect(r.code, r.stderr).toBe(0);
      const m = JSON.parse(readFileSync(join(dir, `out-${name}`, 'metrics.json'), 'utf8')) as { policies: { name: string; totals: Record<string, unknown> }[] };
      return { stderr: r.stderr, totals: m.policies.map((p) => [p.name, p.totals.rollouts, p.totals.informative_groups]) };
    };
    const base = await metrics('once.jsonl');
    expect(base.totals).toContainEqual(['uniform', 48, 9]); // 3 steps × 4 groups of 4; p1–p3 mixed
    for (const name of ['twice.jsonl', 'shuffled.jsonl']) {
      const got = await metrics(name);
      expect(got.totals, name).toEqual(base.totals);
      expect(got.stderr).toContain(`rollout-budget: warning: 16 results lines repeat a rollout_id of their step (the first at ${join(dir, name)}:`);
    }
    expect(base.stderr).not.toContain('repeat a rollout_id');
  });

  it('with some token counts missing, a step whose known tokens fit the token budget is not counted as within it', async () => {
    const dir = tempDir('rb-quirks-');
    // Every rollout 100 tokens, one a step without a count: 1,500 known a step.
    const rows = lines(4, (r, k) => (k % 16 === 5 ? r : { ...r, tokens: 100 }));
    write(join(dir, 'log.jsonl'), rows);
    const r = await cli(['replay', '--log', join(dir, 'log.jsonl'), '--policies', 'uniform', '--budget-tokens', '1000', '--quiet', '--out', join(dir, 'out')]);
    expect(r.code, r.stderr).toBe(0);
    const m = JSON.parse(readFileSync(join(dir, 'out', 'metrics.json'), 'utf8')) as { policies: { totals: Record<string, unknown>; steps: { rollouts: number; tokens: number | null; within_budget: boolean | null }[] }[] };
    const { steps, totals } = m.policies[0]!;
    // Under a 1,000-token budget uniform takes its first step's 16 rollouts whole (15 known: 1,500
    // tokens, over whatever the 16th holds), then 8 a step: step 1 holds the rollout without a
    // count (700 known: cannot be told; before, within), steps 2 and 3 are known (800: within).
    expect(steps.map((s) => [s.rollouts, s.tokens, s.within_budget])).toEqual([[16, null, false], [8, null, null], [8, 800, true], [8, 800, true]]);
    expect(totals).toMatchObject({ budget_compliance: 2 / 3, budget_unchecked_steps: 1 });
  });

  it('a step too thin for our planner (its rollouts aborted) names the policy that cannot plan it', async () => {
    const dir = tempDir('rb-quirks-');
    const log = join(dir, 'aborts.jsonl');
    // Step 1: three of each prompt's four rollouts aborted, so the step's logged budget is 4 rollouts.
    write(log, lines(3, (r) => (r.step === 1 && !String(r.rollout_id).endsWith('#0') ? { ...r, finish_reason: 'abort' } : r)));
    const r = await cli(['replay', '--log', log, '--policies', 'uniform,bayes', '--quiet']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/^rollout-budget: policy bayes, step 1: budget infeasible: 4 prompts × 2 rollouts \(--min-n\) need 8 rollouts; .* is 4 rollouts\. Raise --budget-rollouts, lower --min-n, or set --skip\n$/);
    expect((await cli(['replay', '--log', log, '--policies', 'uniform,bayes', '--skip', '--quiet'])).code).toBe(0);
  });

  it('a results line observe refuses is refused by replay too, an aborted one included, naming the line, field and value', async () => {
    // replay returned before any check on an aborted line and never checked finish_reason,
    // group or the hint: "finish_reason": "eos" (or a misspelt "Abort") counted as a rollout.
    const dir = tempDir('rb-quirks-');
    const cases: [string, (row: Record<string, unknown>, k: number) => Record<string, unknown>, string][] = [
      ['eos', (r, k) => (k === 5 ? { ...r, finish_reason: 'eos' } : r), ':6: "finish_reason" must be "stop", "length" or "abort", got "eos"'],
      ['abort-garbage', (r, k) => (k === 10 ? { ...r, finish_reason: 'abort', reward: 'garbage' } : r), ':11: "reward" must be a number in [0, 1], got "garbage"'],
      ['group', (r, k) => (k === 10 ? { ...r, group: 5 } : r), ':11: "group" must be a non-empty string, got 5'],
      ['hint', (r, k) => (k === 3 ? { ...r, prior_pass_rate: 2 } : r), ':4: "prior_pass_rate"'],
    ];
    for (const [name, edit, message] of cases) {
      const log = join(dir, `${name}.jsonl`);
      write(log, lines(3, edit));
      const replay = await cli(['replay', '--log', log, '--policies', 'uniform,bayes', '--quiet']);
      const observe = await cli(['observe', '--results', log, '--state', join(dir, `${name}.db`)]);
      expect(replay.code, name).toBe(2);
      expect(observe.code, name).toBe(2);
      expect(replay.stderr, name).toContain(`${log}${message}`);
      expect(observe.stderr, name).toContain(`${log}${message}`);
      expect(replay.stdout, name).toBe('');
    }
  });

  it('--log - reads the log from stdin, as plan --prompts - and observe --results - do (it was "-: cannot read (ENOENT)")', async () => {
    const dir = tempDir('rb-quirks-');
    const log = join(dir, 'log.jsonl');
    write(log, lines(4));
    const fromFile = await cli(['replay', '--log', log, '--policies', 'uniform,bayes', '--quiet']);
    const fromStdin = await cli(['replay', '--log', '-', '--policies', 'uniform,bayes', '--quiet'], readFileSync(log, 'utf8'));
    expect(fromStdin.code, fromStdin.stderr).toBe(0);
    // Every figure but the last column (the planning time) the same.
    const figures = (text: string) => text.trim().split('\n').map((l) => l.trim().replace(/\s+\S+$/, ''));
    expect(figures(fromStdin.stdout)).toEqual(figures(fromFile.stdout));
    expect(fromStdin.stdout).toMatch(/^uniform /m);
  });

  it('a logged step above 2^31 − 1 is refused naming the log when our planner would plan it; the baselines replay it', async () => {
    const dir = tempDir('rb-quirks-');
    const log = join(dir, 'big.jsonl');
    write(log, lines(2, (r) => ({ ...r, step: 2 ** 31 + (r.step as number) })));
    const ours = await cli(['replay', '--log', log, '--quiet']);
    expect(ours.code).toBe(2);
    expect(ours.stderr).toBe(`rollout-budget: ${log}: a logged step, 2147483649, is above 2147483647 (2^31 − 1), the largest step our planner takes (its decay counts steps): renumber the log's steps, or replay only the baselines\n`);
    expect((await cli(['replay', '--log', log, '--policies', 'uniform,knapsack-rl', '--quiet'])).code).toBe(0);
  });
});

describe('a folder of verl dumps with other .jsonl files beside the step files', () => {
  /** A verl dump line (RayPPOTrainer._dump_generations): prompt p's j-th rollout at `step`. */
  const verl = (step: number) => Array.from({ length: 16 }, (_, k) => ({ input: `problem ${k >> 2}`, output: 'x', score: (k & 3) < (k >> 2) ? 1 : 0, step }));

  it('reads the <step>.jsonl files only, warns naming the others, and a folder without step files is read whole', async () => {
    const dir = tempDir('rb-quirks-');
    const folder = (name: string, files: Record<string, number[]>) => {
      mkdirSync(join(dir, name));
      for (const [file, steps] of Object.entries(files)) write(join(dir, name, file), steps.flatMap(verl));
      return join(dir, name);
    };
    const clean = folder('clean', { '1.jsonl': [1], '2.jsonl': [2], '3.jsonl': [3] });
    // A validation dump naming step 2, a copy of step 2's file, a file of every step: each was
    // added to the steps its lines name (step 2's groups counted twice, a budget then infeasible).
    const stray = folder('stray', { '1.jsonl': [1], '2.jsonl': [2], '3.jsonl': [3], 'val_generations.jsonl': [2], '2 (copy).jsonl': [2], 'all_steps.jsonl': [1, 2, 3] });
    const named = folder('named', { 'a.jsonl': [1, 2], 'b.jsonl': [3] });
    const steps = async (log: string) => {
      const out = join(dir, `out-${log.split('/').pop()}`);
      const r = await cli(['replay', '--log', log, '--policies', 'uniform,bayes', '--quiet', '--out', out]);
      expect(r.code, r.stderr).toBe(0);
      const m = JSON.parse(readFileSync(join(out, 'metrics.json'), 'utf8')) as { policies: { steps: { step: number; rollouts: number }[] }[] };
      return { stderr: r.stderr, uniform: m.policies[0]!.steps.map((s) => [s.step, s.rollouts]) };
    };
    expect((await steps(clean)).uniform).toEqual([[1, 16], [2, 16], [3, 16]]);
    const got = await steps(stray);
    expect(got.uniform).toEqual([[1, 16], [2, 16], [3, 16]]);
    expect(got.stderr).toContain(`rollout-budget: warning: ${stray}: read its step files (<step>.jsonl, as verl names them) only; left out 3 other .jsonl files beside them: ${join(stray, '2 (copy).jsonl')}, ${join(stray, 'all_steps.jsonl')}, ${join(stray, 'val_generations.jsonl')}\n`);
    const whole = await steps(named);
    expect(whole.uniform).toEqual([[1, 16], [2, 16], [3, 16]]);
    expect(whole.stderr).not.toContain('left out');
    expect(got.stderr).not.toContain('in the file of step');
    // A step file whose lines name another step (a renamed file, two runs' dumps in one folder):
    // merged into that step without a word; now said, naming its first such line.
    const renamed = folder('renamed', { '1.jsonl': [1], '2.jsonl': [5], '3.jsonl': [3] });
    const moved = await steps(renamed);
    expect(moved.uniform).toEqual([[1, 16], [3, 16], [5, 16]]);
    expect(moved.stderr).toContain(`rollout-budget: warning: ${join(renamed, '2.jsonl')}:1: a line of step 5 in the file of step 2: its lines were read as the steps they name; a renamed file, or two runs' dumps in one folder?\n`);
  });
});

describe('Spearman with nothing to rank', () => {
  it('is null (— in the table), not 0, when the predictions or the outcomes are all equal', async () => {
    const dir = tempDir('rb-quirks-');
    // One prompt, 3 steps, always 2 of 4 right: every realised pass rate is 0.5.
    write(join(dir, 'one.jsonl'), lines(3).filter((r) => r.prompt_id === 'p2'));
    const r = await cli(['replay', '--log', join(dir, 'one.jsonl'), '--policies', 'uniform,bayes,knapsack-rl', '--quiet', '--out', join(dir, 'out')]);
    expect(r.code, r.stderr).toBe(0);
    const m = JSON.parse(readFileSync(join(dir, 'out', 'metrics.json'), 'utf8')) as { policies: { name: string; totals: { spearman: number | null; predictions: number } }[] };
    const predicting = m.policies.filter((p) => p.totals.predictions > 1);
    expect(predicting.length).toBeGreaterThan(0);
    for (const p of predicting) expect(p.totals.spearman, p.name).toBeNull();
  });
});

describe('a policy\'s colour in the report', () => {
  it('a baseline keeps its style whichever policies run beside it (greso was orange, blue or green by its place in the list)', async () => {
    const { assignStyles } = await import('../src/report/styles.js');
    const full = assignStyles(['uniform', 'dapo', 'greso', 'knapsack-rl', 'mopps', 'xrpo', 'bayes'], 'bayes');
    for (const names of [['bayes', 'greso'], ['uniform', 'bayes', 'thompson', 'mean', 'greso'], ['xrpo', 'mopps', 'greso', 'bayes']]) {
      const styles = assignStyles(names, 'bayes');
      for (const name of names) if (full.has(name)) expect(styles.get(name), `${name} among ${names.join(',')}`).toEqual(full.get(name));
    }
    // Policies that are not baselines take other slots, distinct from every baseline's colour and dash.
    const others = assignStyles(['uniform', 'thompson', 'mean', 'dapo', 'greso', 'knapsack-rl', 'mopps', 'xrpo'], 'bayes');
    const keyOf = (name: string) => JSON.stringify(others.get(name));
    expect(new Set(['thompson', 'mean', 'dapo', 'greso', 'knapsack-rl', 'mopps', 'xrpo'].map(keyOf)).size).toBe(7);
  });
});

describe('a visits line with a group past any step', () => {
  it('is refused naming the file, line and n (a step\'s sum past 2^53 was refused as a --budget-rollouts never given)', async () => {
    const dir = tempDir('rb-quirks-');
    const log = join(dir, 'v.jsonl');
    writeFileSync(log, '{"step":0,"prompt_id":"a","n":9007199254740991,"correct":5}\n{"step":0,"prompt_id":"b","n":8,"correct":3}\n{"step":1,"prompt_id":"a","n":8,"correct":5}\n');
    const r = await cli(['replay', '--log', log, '--quiet', '--policies', 'uniform,bayes']);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(`rollout-budget: ${log}:1: "n" must be at most 1000000 (rollouts of one prompt at one step), got 9007199254740991\n`);
    // The largest taken.
    writeFileSync(log, '{"step":0,"prompt_id":"a","n":1000000,"correct":5}\n{"step":0,"prompt_id":"b","n":8,"correct":3}\n{"step":1,"prompt_id":"a","n":8,"correct":5}\n');
    const ok = await cli(['replay', '--log', log, '--quiet', '--policies', 'uniform']);
    expect(ok.code, ok.stderr).toBe(0);
  });
});
