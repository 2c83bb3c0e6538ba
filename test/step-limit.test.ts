import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { Allocator } from '../src/index.js';
import { cli } from './cli-helpers.js';
import { call, startService, stopService, type Child } from './service-helpers.js';
import { tempDir } from './temp.js';

/**
 * A step is at most 2³¹ − 1. One result at step 2⁵³ − 1 was accepted; a state's last step never
 * goes down, so every later observe without a step got 2⁵³ and every plan `"step": 2⁵³`, a
 * number no request could send back (beyond 2⁵³ − 1): the state was stuck for good.
 */
describe('option ranges that differed between the CLI and the service', () => {
  it('prefill_weight above 10^6 is refused by the library and the service as by the CLI', async () => {
    const allocator = new Allocator();
    expect(() => allocator.plan([{ id: 'a' }], { rollouts: 4 }, { prefillWeight: 1e7 })).toThrow('prefill_weight must be in [0, 1000000], got 10000000');
    expect(allocator.plan([{ id: 'a' }], { rollouts: 4 }, { prefillWeight: 1e6 }).totals.rollouts).toBe(4);
    allocator.close();
    const r = await cli(['plan', '--prompts', '-', '--state', ':memory:', '--budget-rollouts', '4', '--prefill-weight', '1e7'], '{"id":"a"}\n');
    expect(r.stderr).toBe('rollout-budget: --prefill-weight must be a number in [0, 1000000], got "1e7"\n');
  });
});

describe('steps beyond 2^31 − 1 (and prefill_weight above 10^6 at the service)', () => {
  const dir = tempDir('rb-step-limit-');
  let service: Child | undefined;
  afterAll(async () => {
    if (service !== undefined) await stopService(service);
  });

  it('observe refuses them (both line forms), naming file:line and the value, and the state is as it was', async () => {
    const state = join(dir, 'state.db');
    writeFileSync(join(dir, 'ok.jsonl'), '{"prompt_id":"a","step":3,"rewards":[1,0]}\n');
    expect((await cli(['observe', '--results', join(dir, 'ok.jsonl'), '--state', state])).code).toBe(0);
    for (const line of ['{"prompt_id":"b","step":9007199254740991,"reward":1}', '{"prompt_id":"b","step":2147483648,"rewards":[1,0]}']) {
      writeFileSync(join(dir, 'bad.jsonl'), `{"prompt_id":"a","step":4,"reward":1}\n${line}\n`);
      const r = await cli(['observe', '--results', join(dir, 'bad.jsonl'), '--state', state]);
      expect(r.code, line).toBe(2);
      const value = JSON.parse(line).step as number;
      expect(r.stderr).toBe(`rollout-budget: ${join(dir, 'bad.jsonl')}:2: "step" must be at most 2147483647 (2^31 − 1), got ${value}\n`);
    }
    expect(JSON.parse((await cli(['inspect', '--state', state])).stdout)).toMatchObject({ prompts: 1, last_step: 3 });
    // The largest step is taken, and the next plan's step is one more.
    writeFileSync(join(dir, 'top.jsonl'), '{"prompt_id":"a","step":2147483647,"reward":1}\n');
    expect(JSON.parse((await cli(['observe', '--results', join(dir, 'top.jsonl'), '--state', state])).stdout)).toMatchObject({ last_step: 2147483647 });
  });

  it('plan --step, the library and the service refuse them too', async () => {
    writeFileSync(join(dir, 'prompts.jsonl'), '{"id":"a"}\n');
    const r = await cli(['plan', '--prompts', join(dir, 'prompts.jsonl'), '--state', ':memory:', '--budget-rollouts', '4', '--step', '2147483648']);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe('rollout-budget: --step must be at most 2147483647 (2^31 − 1), got 2147483648\n');
    const allocator = new Allocator();
    expect(() => allocator.plan([{ id: 'a' }], { rollouts: 4 }, { step: 2 ** 31 })).toThrow('step must be at most 2147483647 (2^31 − 1), got 2147483648');
    expect(() => allocator.observe([{ prompt_id: 'a', step: 2 ** 53 - 1, reward: 1 }])).toThrow(/"step" must be at most 2147483647/);
    expect(allocator.store.count()).toBe(0);
    allocator.close();

    service = await startService(['--state', join(dir, 'service.db')]);
    const observed = await call(service.port, 'POST', '/v1/observe', [{ prompt_id: 'a', reward: 1, step: 9007199254740991 }]);
    expect(observed.status).toBe(400);
    expect(observed.json.error).toMatchObject({ code: 'BAD_INPUT', field: 'body[0].step', value: '9007199254740991' });
    const planned = await call(service.port, 'POST', '/v1/plan', { candidates: [{ id: 'a' }], budget: { rollouts: 4 }, options: { step: 2147483648 } });
    expect(planned.status).toBe(400);
    expect(planned.json.error.message).toBe('body.options.step: must be at most 2147483647 (2^31 − 1), got 2147483648');
    const weighted = await call(service.port, 'POST', '/v1/plan', { candidates: [{ id: 'a' }], budget: { rollouts: 4 }, options: { prefill_weight: 1e7 } });
    expect(weighted.status).toBe(400);
    expect(weighted.json.error.message).toBe('body.options.prefill_weight: must be in [0, 1000000], got 10000000');
    // Nothing was stuck: an observe without a step is step 0, the next plan step 1.
    expect((await call(service.port, 'POST', '/v1/observe', [{ prompt_id: 'a', reward: 1 }])).json).toMatchObject({ applied: 1, last_step: 0 });
    expect((await call(service.port, 'POST', '/v1/plan', { candidates: [{ id: 'a' }], budget: { rollouts: 4 } })).json.step).toBe(1);
  });
});
