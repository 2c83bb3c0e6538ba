import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { runCli } from '../src/cli/main.js';
import type { CliIo } from '../src/cli/io.js';
import { createProgress } from '../src/cli/progress.js';
import { CLI } from './service-helpers.js';
import { tempDir } from './temp.js';

function capture(tty = false, progressAfterMs?: number): CliIo & { out: string; err: string } {
  const io = {
    ...(progressAfterMs === undefined ? {} : { progressAfterMs }),
    out: '',
    err: '',
    stdout(text: string) {
      io.out += text;
    },
    stderr(text: string) {
      io.err += text;
    },
    readStdin: async () => '',
    stderrIsTty: tty,
  };
  return io;
}

const fixture = new URL('../fixtures/oneshot-rlvr-dsr-sub/visits.jsonl', import.meta.url).pathname;
const scenario = new URL('../fixtures/scenarios/long-cot-competition.json', import.meta.url).pathname;
const tmp = () => tempDir('rb-cli-');

/** metrics.json without the wall-clock planning times, which no seed fixes. */
function numbers(dir: string): unknown {
  const m = JSON.parse(readFileSync(join(dir, 'metrics.json'), 'utf8'));
  for (const p of m.policies) {
    delete p.totals.plan_ms_per_step;
    for (const s of p.steps) delete s.plan_ms;
  }
  return m;
}

describe('replay CLI', () => {
  it('prints the table, writes the three report files, and the same seed gives the same numbers', async () => {
    const a = tmp();
    const b = tmp();
    const c = tmp();
    const args = ['replay', '--log', fixture, '--steps', '0:40', '--policies', 'uniform,knapsack-rl,mopps,bayes,thompson'];
    const io = capture();
    expect(await runCli([...args, '--seed', '5', '--out', a], io)).toBe(0);
    expect(io.out).toMatch(/^policy\s+effective ratio/m);
    expect(io.out).toMatch(/^uniform\s+\d\.\d{3} \(1\.00×\)/m);
    for (const f of ['metrics.json', 'summary.md', 'report.html']) expect(existsSync(join(a, f))).toBe(true);
    expect(readFileSync(join(a, 'summary.md'), 'utf8')).toContain('| knapsack-rl |');
    expect(io.err).toBe('');
    expect(await runCli([...args, '--seed', '5', '--out', b], capture())).toBe(0);
    expect(numbers(b)).toEqual(numbers(a));
    expect(await runCli([...args, '--seed', '6', '--out', c], capture())).toBe(0);
    expect(numbers(c)).not.toEqual(numbers(a));
  });

  it('bad input: exit 2, file:line in one message, no stack, no report written', async () => {
    const d = tmp();
    const log = join(d, 'bad.jsonl');
    writeFileSync(log, '{"step": 0, "prompt_id": "1", "n": 8, "correct": 2}\n{"step": 1, "prompt_id": "1", "n": 8, "correct": -1}\n');
    const io = capture();
    const out = join(d, 'report');
    expect(await runCli(['replay', '--log', log, '--out', out], io)).toBe(2);
    expect(io.err).toContain(`${log}:2:`);
    expect(io.err).toContain('"correct"');
    expect(io.err).not.toContain('    at ');
    expect(existsSync(out)).toBe(false);
  });

  it('a log where uniform\'s headline figures are all 0 says there is no ratio (it printed "against uniform: .")', async () => {
    const log = join(tempDir('rb-no-ratio-'), 'solved.jsonl');
    writeFileSync(log, '{"step":0,"prompt_id":"a","n":8,"correct":8}\n{"step":1,"prompt_id":"a","n":8,"correct":8}\n');
    const io = capture();
    expect(await runCli(['replay', '--log', log, '--policies', 'uniform,bayes'], io)).toBe(0);
    expect(io.out.trim().split('\n').at(-1)).toBe("Our default (bayes, value balanced, 2 rounds a step) has no ratio to uniform: uniform's headline figures are all 0 here (no informative group, no hard positive), so the table's absolute figures are the comparison.");
  });

  it('replay and simulate: an --out that is a file is named before the run, exit 2, the file untouched', async () => {
    const d = tmp();
    const out = join(d, 'not-a-folder');
    writeFileSync(out, 'kept\n');
    for (const argv of [['replay', '--log', fixture], ['simulate', '--scenario', scenario]]) {
      const io = capture();
      expect(await runCli([...argv, '--out', out], io), argv[0]).toBe(2);
      expect(io.err, argv[0]).toBe(`rollout-budget: ${out}: cannot write the report (a file is there; --out names a folder)\n`);
      expect(io.out, argv[0]).toBe(''); // no table: nothing was run
    }
    expect(readFileSync(out, 'utf8')).toBe('kept\n');
    // A file on the way to --out: an internal error with a stack trace before (statSync's ENOTDIR).
    for (const argv of [['replay', '--log', fixture], ['simulate', '--scenario', scenario]]) {
      const io = capture();
      expect(await runCli([...argv, '--out', join(out, 'report')], io), argv[0]).toBe(2);
      expect(io.err, argv[0]).toBe(`rollout-budget: ${join(out, 'report')}: cannot write the report (ENOTDIR: a part of the path is a file, not a folder)\n`);
    }
  });

  it('replay --out where a folder cannot be made ends with exit 2 (under /proc, Node\'s recursive mkdir never returned), and makes nested folders', async () => {
    // A process of its own with a time limit: the old loop never yielded, so in-process it would stall the test run.
    const run = spawnSync(process.execPath, [CLI, 'replay', '--log', fixture, '--policies', 'uniform', '--steps', '3', '--quiet', '--out', '/proc/self/rb-report'], { encoding: 'utf8', timeout: 20_000 });
    expect(run.signal).toBeNull();
    expect(run.status).toBe(2);
    expect(run.stderr).toMatch(/^rollout-budget: \/proc\/self\/rb-report: cannot write the report \((ENOENT|EACCES|EPERM)\)\n$/);
    const nested = join(tmp(), 'a', 'b');
    expect(await runCli(['replay', '--log', fixture, '--policies', 'uniform', '--steps', '3', '--quiet', '--out', nested], capture())).toBe(0);
    expect(readdirSync(nested).sort()).toEqual(['metrics.json', 'report.html', 'summary.md']);
  }, 30_000);

  it('rejects an unknown policy, oracle in replay, and a bad step range, with exit 2', async () => {
    const io1 = capture();
    expect(await runCli(['replay', '--log', fixture, '--policies', 'uniform,nope'], io1)).toBe(2);
    expect(io1.err).toBe('rollout-budget: --policies: unknown policy "nope"; replay takes uniform, dapo, greso, knapsack-rl, mopps, xrpo, bayes, thompson, mean\n');
    const sim = capture();
    expect(await runCli(['simulate', '--scenario', scenario, '--policies', 'nope'], sim)).toBe(2);
    expect(sim.err).toContain('simulate takes uniform, dapo, greso, knapsack-rl, mopps, xrpo, bayes, thompson, mean, oracle\n');
    // Named twice, a policy ran twice: two "our default" rows and the legend twice over.
    const twice = capture();
    expect(await runCli(['replay', '--log', fixture, '--policies', 'uniform,bayes,uniform', '--steps', '3'], twice)).toBe(2);
    expect(twice.err).toBe('rollout-budget: --policies: "uniform" is named twice; name each policy once\n');
    const io2 = capture();
    expect(await runCli(['replay', '--log', fixture, '--policies', 'oracle', '--steps', '0:3'], io2)).toBe(2);
    expect(io2.err).toContain('only a simulation knows');
    const io3 = capture();
    expect(await runCli(['replay', '--log', fixture, '--steps', '9:3'], io3)).toBe(2);
  });

  it('replay and simulate refuse a --min-n our planner cannot keep before reading the log or the scenario (it was after the whole log)', async () => {
    const dir = tmp();
    // Bad at line 2, and not a scenario: a command that read them first would name them.
    const log = join(dir, 'bad.jsonl');
    writeFileSync(log, '{"step":0,"prompt_id":"a","rewards":[1,0]}\n{"step": 1, nope\n');
    for (const argv of [['replay', '--log', log, '--format', 'visits'], ['simulate', '--scenario', log]]) {
      const io = capture();
      expect(await runCli([...argv, '--min-n', '5000', '--max-n', '5000', '--quiet'], io), argv[0]).toBe(2);
      expect(io.err).toBe('rollout-budget: --min-n must be at most 4096 (the most rollouts one prompt can get in a plan), got 5000\n');
    }
    // The baselines alone take any bounds: the log is read, and its bad line named.
    const baselines = capture();
    expect(await runCli(['replay', '--log', log, '--format', 'visits', '--policies', 'uniform', '--min-n', '5000', '--max-n', '5000', '--quiet'], baselines)).toBe(2);
    expect(baselines.err).toMatch(/bad\.jsonl:\d: /);
  });

  it('progress bar: --quiet silences it on a terminal where it would draw', async () => {
    // The bar draws at once here (progressAfterMs 0), so a silent run is --quiet's doing.
    const args = ['replay', '--log', fixture, '--steps', '0:5', '--policies', 'uniform'];
    const drawn = capture(true, 0);
    expect(await runCli(args, drawn)).toBe(0);
    expect(drawn.err).toContain('replaying [');
    const quiet = capture(true, 0);
    expect(await runCli([...args, '--quiet'], quiet)).toBe(0);
    expect(quiet.err).toBe('');
    const pipe = capture(false, 0);
    expect(await runCli(args, pipe)).toBe(0);
    expect(pipe.err).toBe('');
  });

  it('progress bar: drawn on a terminal once the run is long enough, never off one', () => {
    let t = 0;
    const clock = () => t;
    const tty = capture(true);
    const bar = createProgress(tty, false, 'replaying', 2000, clock);
    bar.update(1, 10);
    expect(tty.err).toBe(''); // not yet 2 s
    t = 2500;
    bar.update(5, 10);
    expect(tty.err).toContain('replaying [###############...............]  50%');
    bar.finish();
    expect(tty.err.endsWith('\n')).toBe(true);
    const pipe = capture(false);
    const quiet = createProgress(pipe, false, 'replaying', 0, clock);
    quiet.update(5, 10);
    quiet.finish();
    expect(pipe.err).toBe('');
  });

  it('simulate: long-CoT scenario with a binding token budget; oracle runs; the token budget binds uniform', async () => {
    const d = tmp();
    const io = capture();
    expect(await runCli(['simulate', '--scenario', scenario, '--steps', '12', '--policies', 'uniform,bayes,oracle', '--out', d], io)).toBe(0);
    const m = JSON.parse(readFileSync(join(d, 'metrics.json'), 'utf8'));
    const byName = new Map(m.policies.map((p: { name: string }) => [p.name, p]));
    const u = byName.get('uniform') as { totals: { tokens: number; rollouts: number }; steps: { rollouts: number }[] };
    expect(u.totals.tokens).toBeGreaterThan(0);
    // 8 a prompt would be 512 rollouts a step; the 30k-token-a-prompt budget holds uniform to fewer.
    expect(Math.max(...u.steps.map((s) => s.rollouts))).toBeLessThan(8 * 64);
    expect((byName.get('oracle') as { totals: { brier: number } }).totals.brier).toBeGreaterThanOrEqual(0);
    expect(io.out).toMatch(/^oracle\s/m);
  });

  it('simulate: a scenario with a bad field is exit 2 naming it', async () => {
    const d = tmp();
    const file = join(d, 's.json');
    writeFileSync(file, JSON.stringify({ prompts: 100, difficulty: { alpha: -1 } }));
    const io = capture();
    expect(await runCli(['simulate', '--scenario', file], io)).toBe(2);
    expect(io.err).toContain('"alpha"');
    expect(io.err).toContain('-1');
  });

  it('a group\'s difficulty takes what it leaves out from the scenario\'s own (it took the built-in pool\'s: an easy file became a hard one)', async () => {
    const { parseScenario } = await import('../src/index.js');
    const easy = { alpha: 50, beta: 0.5, unsolvable: 0 };
    const s = parseScenario(JSON.stringify({ prompts: 100, difficulty: easy, groups: [{ name: 'a', share: 1 }, { name: 'b', share: 1, difficulty: { beta: 2 } }] }), 'g.json');
    expect(s.groups.map((g) => g.difficulty)).toEqual([easy, { alpha: 50, beta: 2, unsolvable: 0 }]);
    // Without a difficulty of its own, the file's groups take the built-in one (RL math).
    const plain = parseScenario(JSON.stringify({ prompts: 100, groups: [{ name: 'a', share: 1 }] }), 'p.json');
    expect(plain.groups[0]!.difficulty).toEqual({ alpha: 0.349, beta: 0.693, unsolvable: 0.08 });
    // The length model's log-length coefficients within reach of a real response (e^15 tokens at most).
    expect(() => parseScenario(JSON.stringify({ length: { a: 100, cap: null } }), 'l.json')).toThrow(/l\.json: length: "a" must be .*15.*got 100/);
  });

  it('a policy that generates nothing at any step is said so, and its ratios are — (null), not 0.000', async () => {
    const d = tmp();
    const io = capture();
    expect(await runCli(['replay', '--log', fixture, '--steps', '0:4', '--policies', 'uniform,bayes', '--budget-rollouts', '1', '--skip', '--quiet', '--out', d], io)).toBe(0);
    expect(io.err).toContain("rollout-budget: warning: bayes generated no rollout at any step: no prompt's min_n rollouts (or their expected tokens) fit a step's budget; raise --budget-rollouts or lower --min-n\n");
    const m = JSON.parse(readFileSync(join(d, 'metrics.json'), 'utf8')) as { policies: { name: string; totals: Record<string, unknown> }[] };
    const bayes = m.policies.find((p) => p.name === 'bayes')!.totals;
    expect([bayes.rollouts, bayes.effective_ratio, bayes.all_correct_ratio, bayes.all_wrong_ratio]).toEqual([0, null, null, null]);
    expect(readFileSync(join(d, 'summary.md'), 'utf8')).toContain('bayes generated no rollout at any step');
  });

  it('simulate: a misspelt scenario field is a warning naming it and the fields it could be; the run is the one without it', async () => {
    const d = tmp();
    const plain = { prompts: 64, batch: 16, steps: 3, budget: { rollouts_per_prompt: 4 } };
    const typo = { ...plain, budget: { ...plain.budget, rollout_per_prompt: 16 }, stepz: 9, groups: [{ name: 'g', share: 1, sahre: 2 }] };
    const files = [join(d, 'plain.json'), join(d, 'typo.json')];
    writeFileSync(files[0]!, JSON.stringify({ ...plain, groups: [{ name: 'g', share: 1 }] }));
    writeFileSync(files[1]!, JSON.stringify(typo));
    const [a, b] = [capture(), capture()];
    const argv = ['--policies', 'uniform,bayes', '--quiet'];
    expect(await runCli(['simulate', '--scenario', files[0]!, ...argv], a)).toBe(0);
    expect(await runCli(['simulate', '--scenario', files[1]!, ...argv], b)).toBe(0);
    expect(a.err).toBe('');
    expect(b.err.split('\n').filter(Boolean)).toEqual([
      `rollout-budget: warning: ${files[1]}: unknown field "stepz" ignored (a misspelt field leaves the one meant at its default); expected one of name, description, prompts, batch, steps, seed, budget, difficulty, drift, length, groups, hints`,
      `rollout-budget: warning: ${files[1]}: budget: unknown field "rollout_per_prompt" ignored (a misspelt field leaves the one meant at its default); expected one of rollouts_per_prompt, tokens_per_prompt`,
      `rollout-budget: warning: ${files[1]}: groups[0]: unknown field "sahre" ignored (a misspelt field leaves the one meant at its default); expected one of name, share, difficulty, hint_shift`,
    ]);
    // The table has no column that names the file: the same numbers, as the fields were ignored.
    expect(b.out.replace(/plan ms\/step.*$|\s[\d.]+$/gm, '')).toBe(a.out.replace(/plan ms\/step.*$|\s[\d.]+$/gm, ''));
    expect(b.out).toMatch(/^uniform\s.*\s192 \(1\.00×\)/m); // 3 steps × 16 prompts × 4 rollouts: rollouts_per_prompt stayed 4, not the 16 misspelt
    // The report carries them too, as it carries replay's warnings: one who reads only the page sees them.
    const report = join(d, 'report');
    expect(await runCli(['simulate', '--scenario', files[1]!, ...argv, '--out', report], capture())).toBe(0);
    const summary = readFileSync(join(report, 'summary.md'), 'utf8');
    expect(summary).toContain(`> **Warning:** ${files[1]}: budget: unknown field "rollout_per_prompt" ignored`);
    expect(readFileSync(join(report, 'report.html'), 'utf8')).toContain(`<p class="warn">${files[1]}: unknown field &#34;stepz&#34; ignored`);
  });

  it('regression (simulate --no-skip told you to raise --budget-rollouts, a flag simulate does not have): the infeasible budget names the scenario\'s fields', async () => {
    const io = capture();
    expect(await runCli(['simulate', '--scenario', scenario, '--no-skip', '--steps', '2', '--policies', 'bayes', '--quiet'], io)).toBe(2);
    expect(io.err).toMatch(/^rollout-budget: policy bayes, step 0: budget infeasible: 64 prompts × 2 rollouts \(--min-n\) need 128 rollouts/);
    expect(io.err).toContain("Raise the scenario's budget.rollouts_per_prompt or the scenario's budget.tokens_per_prompt, lower --min-n, or set --skip");
    expect(io.err).not.toContain('--budget-');
  });
});
