import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { quote } from '../src/index.js';
import { cli } from './cli-helpers.js';
import { tempDir } from './temp.js';

// Numbers in files that a double, a context or a state cannot hold: literals beyond the largest
// double or 2^53, token counts above 10⁷, and the last step a state may hold. Each test named
// after what broke.

describe('numbers a double cannot hold', () => {
  it('a number literal beyond the largest double is named as one, not as a bare Infinity (a JSON file cannot hold Infinity)', async () => {
    const dir = tempDir();
    const prompts = join(dir, 'prompts.jsonl');
    writeFileSync(prompts, '{"id":"a","prompt_tokens":10}\n{"id":"b","prompt_tokens":1e400}\n');
    const p = await cli(['plan', '--prompts', prompts, '--state', ':memory:', '--budget-rollouts', '16']);
    expect(p.code).toBe(2);
    expect(p.stderr).toBe(`rollout-budget: ${prompts}:2: "prompt_tokens" must be a non-negative integer, got Infinity (a number beyond ±1.8e308)\n`);
    // 2^53 + 1 reads as 2^53: the message says the number it read is beyond what a JSON number holds exactly.
    const steps = join(dir, 'steps.jsonl');
    writeFileSync(steps, '{"prompt_id":"a","reward":1,"step":9007199254740993}\n');
    const big = await cli(['observe', '--results', steps, '--state', ':memory:']);
    expect(big.code).toBe(2);
    expect(big.stderr).toBe(`rollout-budget: ${steps}:1: "step" must be a non-negative integer, got 9007199254740992 (as read: an integer beyond 2^53 − 1 = 9007199254740991, the largest a JSON number holds exactly)\n`);
    const results = join(dir, 'results.jsonl');
    writeFileSync(results, '{"prompt_id":"a","reward":-1e999,"step":0}\n');
    const o = await cli(['observe', '--results', results, '--state', ':memory:']);
    expect(o.code).toBe(2);
    expect(o.stderr).toBe(`rollout-budget: ${results}:1: "reward" must be a number in [0, 1], got -Infinity (a number beyond ±1.8e308)\n`);
    expect(quote(Number.NaN)).toBe('NaN');
  });
});

describe('token counts beyond any context', () => {
  it('a rollout\'s tokens (a line, a group\'s), a prompt\'s prompt_tokens or max_tokens above 10⁷ are refused naming file, line, field and value; the state as it was', async () => {
    // Found by a hostile review: one results line with "tokens": 2^53 − 1 was taken (exit 0), the
    // pooled mean length became 1.6e13, and a later token-budget plan kept 5 of 18 prompts.
    const { readFileSync } = await import('node:fs');
    const dir = tempDir();
    const state = join(dir, 'state.db');
    const ok = join(dir, 'ok.jsonl');
    writeFileSync(ok, '{"prompt_id":"a","step":0,"reward":1,"tokens":10000000,"rollout_id":"a0"}\n');
    expect((await cli(['observe', '--results', ok, '--state', state])).code).toBe(0); // the largest taken
    const before = readFileSync(state);
    const at = '(10⁷ tokens, longer than any model\'s context)';
    const cases: [string, string][] = [
      ['{"prompt_id":"u","step":5,"reward":1,"tokens":9007199254740991,"rollout_id":"x1"}', `"tokens" must be at most 10000000 ${at}, got 9007199254740991`],
      ['{"prompt_id":"u","step":5,"rewards":[1,0],"tokens":[10,10000001]}', `"tokens[1]" must be at most 10000000 ${at}, got 10000001`],
      // The slow path's check too (a key the fast scanner leaves to it: an escaped one).
      ['{"prompt_id":"u","step":5,"reward":1,"tok\\u0065ns":10000001}', `"tokens" must be at most 10000000 ${at}, got 10000001`],
    ];
    for (const [line, message] of cases) {
      const file = join(dir, 'bad.jsonl');
      writeFileSync(file, `{"prompt_id":"b","step":5,"reward":0}\n${line}\n`);
      const r = await cli(['observe', '--results', file, '--state', state]);
      expect(r.code, line).toBe(2);
      expect(r.stderr, line).toBe(`rollout-budget: ${file}:2: ${message}\n`);
    }
    expect(readFileSync(state).equals(before)).toBe(true);
    for (const [key, value] of [['prompt_tokens', 10000001], ['max_tokens', 9007199254740991]] as const) {
      const prompts = join(dir, 'p.jsonl');
      writeFileSync(prompts, `{"id":"a"}\n{"id":"b","${key}":${value}}\n`);
      const p = await cli(['plan', '--prompts', prompts, '--state', ':memory:', '--budget-rollouts', '16']);
      expect(p.code, key).toBe(2);
      expect(p.stderr, key).toBe(`rollout-budget: ${prompts}:2: "${key}" must be at most 10000000 ${at}, got ${value}\n`);
    }
  });
});

describe('the last step a state may hold', () => {
  it('a plan or an observe without a step takes that step again, not one past it that observe and --step refuse', async () => {
    // A statistician's review: at last step 2^31 − 1 the plan's default step was 2^31, and
    // observing that plan's results with the step it named was exit 2.
    const dir = tempDir();
    const state = join(dir, 'state.db');
    const results = join(dir, 'r.jsonl');
    writeFileSync(results, '{"prompt_id":"a","step":2147483647,"reward":1}\n');
    expect((await cli(['observe', '--results', results, '--state', state])).code).toBe(0);
    const prompts = join(dir, 'p.jsonl');
    writeFileSync(prompts, '{"id":"a"}\n');
    const plan = await cli(['plan', '--prompts', prompts, '--state', state, '--budget-rollouts', '4']);
    expect(plan.code, plan.stderr).toBe(0);
    expect(JSON.parse(plan.stdout).step).toBe(2147483647);
    writeFileSync(results, '{"prompt_id":"a","reward":0}\n');
    const o = await cli(['observe', '--results', results, '--state', state]);
    expect(o.code, o.stderr).toBe(0);
    expect(JSON.parse(o.stdout)).toMatchObject({ applied: 1, last_step: 2147483647 });
  });
});
