import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeEach, describe, expect, it } from 'vitest';
import { AsyncAllocator, Service, SqliteStore, asyncStoreOf, type Plan } from '../src/index.js';
import { cli } from './cli-helpers.js';
import { tempDir } from './temp.js';

const fixture = (...p: string[]) => join(import.meta.dirname, '..', 'fixtures', ...p);

let dir: string;
beforeEach(() => {
  dir = tempDir('rb-shared-');
});

/** Each flag's help text, whitespace collapsed: flag → text. */
async function helpOf(command: string): Promise<Map<string, string>> {
  const text = (await cli([command, '--help'])).stdout.replace(/\s+/g, ' ');
  const out = new Map<string, string>();
  for (const part of text.split(/ (?=--[a-z])/)) out.set(part.split(' ')[0]!, part);
  return out;
}

describe('shared flags: declared once, defaults from the library, shown in --help', () => {
  it('plan, observe, loop, replay and simulate show the library defaults', async () => {
    const plan = await helpOf('plan');
    for (const [flag, value] of [['--min-n', '2'], ['--max-n', '64'], ['--policy', '"bayes"'], ['--value', '"balanced"'], ['--seed', '0'], ['--decay', '0.995'], ['--reobserve-discount', '0.85'], ['--rounds-left', '1'], ['--prefill-weight', '0']]) {
      expect(plan.get(flag), flag).toContain(`(default: ${value})`);
    }
    expect(plan.get('--policy')).toContain('bayes, thompson, mean');
    expect(plan.get('--value')).toContain('knapsack, balanced, informative, variance, hit');
    const observe = await helpOf('observe');
    expect(observe.get('--decay')).toContain('(default: 0.995)');
    expect(observe.get('--reobserve-discount')).toContain('(default: 0.85)');
    for (const command of ['loop', 'replay', 'simulate', 'demo']) {
      expect((await helpOf(command)).get('--rounds'), command).toContain('(default: 2)');
    }
    expect((await helpOf('loop')).get('--min-n')).toContain('(default: 2)');
  });

  it('library errors name option fields; the CLI shows the flags', async () => {
    const prompts = join(dir, 'p.jsonl');
    writeFileSync(prompts, '{"id":"a"}\n{"id":"b"}\n');
    const state = join(dir, 's.db');
    const none = await cli(['plan', '--prompts', prompts, '--state', state]);
    expect(none.code).toBe(2);
    expect(none.stderr).toBe('rollout-budget: a budget is required: give --budget-rollouts, --budget-tokens, or both\n');
    const bounds = await cli(['plan', '--prompts', prompts, '--state', state, '--budget-rollouts', '8', '--min-n', '5', '--max-n', '3']);
    expect(bounds.stderr).toBe('rollout-budget: --max-n must be an integer ≥ 5, got 3\n');
  });

  it('regression (a rollout budget assumed 1,024 tokens a rollout with "warnings": []): the assumption is a warning whenever expected tokens are reported', async () => {
    const prompts = join(dir, 'p.jsonl');
    writeFileSync(prompts, '{"id":"a"}\n{"id":"b","max_tokens":4096}\n');
    const run = await cli(['plan', '--prompts', prompts, '--state', join(dir, 's.db'), '--budget-rollouts', '8']);
    expect(run.code).toBe(0);
    const plan = JSON.parse(run.stdout) as Plan;
    expect(plan.allocations.find((a) => a.prompt_id === 'a')!.expected_tokens).toBe(1024 * plan.allocations.find((a) => a.prompt_id === 'a')!.n);
    expect(plan.warnings).toEqual(['2 prompts have no length data (their own, their group\'s or any prompt\'s): expected tokens per rollout assumed, 1 at their max_tokens, 1 without max_tokens at 1024']);
    // One prompt: "1 prompt has" (it read "1 prompts have"), and "planned prompts", not "groups",
    // which on a cold start reads as the prompts' source groups.
    const one = join(dir, 'one.jsonl');
    writeFileSync(one, '{"id":"a","group":"cn_k12"}\n');
    const single = await cli(['plan', '--prompts', one, '--state', join(dir, 's1.db'), '--budget-rollouts', '8']);
    expect(single.code).toBe(0);
    expect((JSON.parse(single.stdout) as Plan).warnings).toEqual(['1 prompt has no length data (their own, their group\'s or any prompt\'s): expected tokens per rollout assumed, 1 without max_tokens at 1024']);
    expect(single.stderr).toContain('warning: 1 planned prompt has no max_tokens (none in the prompts file, no --max-tokens)');
  });
});

describe('--steps is a count in every command; replay keeps its range under --step-range (and the old --steps a:b)', () => {
  const log = fixture('oneshot-rlvr-dsr-sub', 'visits.jsonl');
  const replay = (extra: string[]) => cli(['replay', '--log', log, '--policies', 'uniform,bayes', '--quiet', ...extra]);

  it('replay --steps 5 = --step-range 0:4 = --steps 0:4', async () => {
    const count = await replay(['--steps', '5']);
    const range = await replay(['--step-range', '0:4']);
    const old = await replay(['--steps', '0:4']);
    expect(count.code, count.stderr).toBe(0);
    const strip = (t: string) => t.split('\n').map((l) => l.replace(/\s+[\d.]+$/, '')).join('\n'); // planning ms/step is wall-clock
    expect(strip(count.stdout)).toBe(strip(range.stdout));
    expect(strip(old.stdout)).toBe(strip(range.stdout));
    // Five steps of 43 prompts at 8 rollouts: uniform generates 1720.
    expect(count.stdout).toMatch(/uniform .* 1720 \(1\.00×\)/);
  });

  it('rejects both at once, and more steps than the log has', async () => {
    const both = await replay(['--steps', '5', '--step-range', '0:4']);
    expect(both.code).toBe(2);
    expect(both.stderr).toMatch(/give --steps or --step-range, not both/);
    const many = await replay(['--steps', '1000']);
    expect(many.code).toBe(2);
    expect(many.stderr).toMatch(/--steps must be at most 498 \(the log's steps\), got 1000/);
  });

  it('warns when a step range reaches past the log (300:498 ran 300..497 without a word); an open end does not', async () => {
    const past = await replay(['--step-range', '494:498']);
    expect(past.code, past.stderr).toBe(0);
    expect(past.stderr).toContain('warning: the step range 494:498 reaches past the log\'s steps, 0..497: replayed steps 494..497');
    const open = await replay(['--step-range', '494:']);
    expect(open.code, open.stderr).toBe(0);
    expect(open.stderr).not.toContain('reaches past');
  });
});

describe('demo: plans in rounds and tells the truth', () => {
  it('regression (demo --steps 1000 silently ran 497 steps): more steps than the fixture has is an error', async () => {
    const r = await cli(['demo', '--steps', '1000']);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe('rollout-budget: --steps must be at most 498 (the fixture\'s logged step count), got 1000\n');
    expect(r.stdout).toBe('');
  });

  it('prints the planned and the logged uniform-8 figures; the logged ones match the fixture', async () => {
    const r = await cli(['demo', '--steps', '10']);
    expect(r.code, r.stderr).toBe(0);
    // Independent count of the logged side from visits.jsonl: steps 0–9.
    const visits = readFileSync(fixture('oneshot-rlvr-dsr-sub', 'visits.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { step: number; n: number; correct: number });
    const first = visits.filter((v) => v.step < 10);
    const informative = first.filter((v) => v.correct > 0 && v.correct < v.n).length;
    const rollouts = first.reduce((s, v) => s + v.n, 0);
    const effective = first.filter((v) => v.correct > 0 && v.correct < v.n).reduce((s, v) => s + v.n, 0) / rollouts;
    expect(r.stdout).toMatch(/planned in 2 rounds a step/);
    expect(r.stdout).toMatch(new RegExp(`rollouts\\s+${rollouts}\\s+${rollouts}\\s+1\\.00×`));
    const row = /informative groups \(reward variance\)\s+(\d+)\s+(\d+)\s+([\d.]+)×/.exec(r.stdout);
    expect(row).not.toBeNull();
    expect(Number(row![2])).toBe(informative);
    expect(Number(row![3])).toBeCloseTo(Number(row![1]) / informative, 2);
    expect(r.stdout).toMatch(new RegExp(`effective ratio\\s+[\\d.]+\\s+${effective.toFixed(3)}`));
    expect(r.stdout).toMatch(/hard-prompt positives \(p ≤ 0\.2\)\s+\d+\s+\d+/);
  });
});

describe('service: options.rounds_left, and errors in body fields', () => {
  it('plans a round\'s share, and an infeasible budget names budget.rollouts, options.min_n and options.skip', async () => {
    const service = new Service(new AsyncAllocator(asyncStoreOf(new SqliteStore(':memory:'))));
    try {
      const candidates = Array.from({ length: 32 }, (_, i) => ({ id: `p${i}` }));
      const ok = await service.handle({ method: 'POST', path: '/v1/plan', body: JSON.stringify({ candidates, budget: { rollouts: 120 }, options: { rounds_left: 2, fresh_share: 0 } }) });
      expect(ok.status).toBe(200);
      const plan = JSON.parse(ok.body) as Plan;
      expect(plan.rounds_left).toBe(2);
      expect(plan.budget_left).toEqual({ rollouts: 120, tokens: null });
      expect(plan.totals.rollouts).toBe(64);
      // The default fresh_share (0.7) for 32 prompts new to the state: ⌊60 + 0.7·60⌋ = 102.
      const fresh = await service.handle({ method: 'POST', path: '/v1/plan', body: JSON.stringify({ candidates, budget: { rollouts: 120 }, options: { rounds_left: 2 } }) });
      expect((JSON.parse(fresh.body) as Plan).budget.rollouts).toBe(102);
      const badShare = await service.handle({ method: 'POST', path: '/v1/plan', body: JSON.stringify({ candidates, budget: { rollouts: 120 }, options: { rounds_left: 2, fresh_share: 2 } }) });
      expect(badShare.status).toBe(400);
      expect(JSON.parse(badShare.body).error.message).toMatch(/body\.options\.fresh_share: must be in \[0, 1\], got 2/);
      const bad = await service.handle({ method: 'POST', path: '/v1/plan', body: JSON.stringify({ candidates, budget: { rollouts: 63 }, options: { rounds_left: 2 } }) });
      expect(bad.status).toBe(422);
      const error = JSON.parse(bad.body).error as { code: string; message: string };
      expect(error.code).toBe('BUDGET_INFEASIBLE');
      expect(error.message).toMatch(/32 prompts × 2 rollouts \(options\.min_n\) need 64 rollouts; budget left \(whole, not a round's share\) is 63 rollouts\. Raise budget\.rollouts, lower options\.min_n, or set options\.skip/);
      const zero = await service.handle({ method: 'POST', path: '/v1/plan', body: JSON.stringify({ candidates, budget: { rollouts: 63 }, options: { rounds_left: 0 } }) });
      expect(zero.status).toBe(400);
      expect(JSON.parse(zero.body).error.message).toMatch(/body\.options\.rounds_left: must be an integer ≥ 1, got 0/);
    } finally {
      await service.allocator.close();
    }
  });
});
