import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { describe, expect, it } from 'vitest';
import { cli } from './cli-helpers.js';
import { tempDir } from './temp.js';

const root = join(import.meta.dirname, '..');
const schema = (name: string) => JSON.parse(readFileSync(join(root, 'schemas', `${name}.schema.json`), 'utf8'));
const ajv = new Ajv2020({ allErrors: true, strict: false });
const compiled = new Map<string, ReturnType<typeof ajv.compile>>();
/** One compiled validator per schema (Ajv refuses a second schema with the same $id). */
const validator = (name: string) => compiled.get(name) ?? compiled.set(name, ajv.compile(schema(name))).get(name)!;

describe('published JSON Schemas', () => {
  it('the real fixture prompts validate; a bad line does not', () => {
    const check = validator('prompts');
    const lines = readFileSync(join(root, 'fixtures', 'oneshot-rlvr-dsr-sub', 'prompts.jsonl'), 'utf8').trim().split('\n');
    expect(lines.length).toBe(403);
    for (const line of lines) expect(check(JSON.parse(line)), JSON.stringify(check.errors)).toBe(true);
    expect(check({ id: 'a', max_tokens: 0 })).toBe(false);
    expect(check({ id: 'a', partial_rewards: [0, 1, 0.5] })).toBe(true);
    expect(check({ id: 'a', partial_rewards: [0, 2] })).toBe(false);
    expect(check({ id: 'a', group: 'olympiad', prior_pass_rate: 0.125, prior_samples: 16 })).toBe(true);
    expect(check({ id: 'a', prior_pass_rate: 1.5 })).toBe(false);
    expect(check({ id: 'a', prior_pass_rate: 0.5, prior_samples: 0 })).toBe(false);
    expect(check({ id: 'a', prior_samples: 8 })).toBe(false);
  });

  it('the shipped scenarios\' candidates validate, hints and groups included', async () => {
    const { parseScenario, simulatedEnvironment } = await import('../src/index.js');
    const check = validator('prompts');
    let hinted = 0;
    for (const name of ['one-epoch-pool', 'two-epoch-pool']) {
      const file = join(root, 'fixtures', 'scenarios', `${name}.json`);
      const env = simulatedEnvironment(parseScenario(readFileSync(file, 'utf8'), file));
      for (const c of env.batch(0)) {
        expect(check(c), JSON.stringify(check.errors)).toBe(true);
        if (c.prior_pass_rate !== undefined && typeof c.group === 'string') hinted++;
      }
    }
    expect(hinted).toBe(128);
  });

  it('a scenario file nested past the JSON depth limit is refused by name, as malformed JSON is', async () => {
    const { parseScenario } = await import('../src/index.js');
    const deep = `{"prompts": 8, "budget": ${'['.repeat(200)}${']'.repeat(200)}}`;
    expect(() => parseScenario(deep, 'deep.json')).toThrow(/deep\.json: JSON nested deeper than 128 levels/);
    expect(() => parseScenario('{"prompts": ', 'cut.json')).toThrow(/cut\.json: malformed JSON/);
  });

  it('results lines of both shapes validate; mixed or out-of-range ones do not', () => {
    const check = validator('results');
    expect(check({ prompt_id: 'a', reward: 1, tokens: 3, finish_reason: 'stop', rollout_id: 'r' })).toBe(true);
    expect(check({ prompt_id: 'a', step: 2, rewards: [0, 1], tokens: [4, 5] })).toBe(true);
    expect(check({ prompt_id: 'a', reward: 1, rewards: [1] })).toBe(false);
    expect(check({ prompt_id: 'a', reward: 1.5 })).toBe(false);
    expect(check({ prompt_id: 'a', reward: 1, finish_reason: 'done' })).toBe(false);
    expect(check({ prompt_id: 'a', reward: 1, group: 'g', prior_pass_rate: 0.25, prior_samples: 8 })).toBe(true);
    expect(check({ prompt_id: 'a', rewards: [1, 0], prior_pass_rate: 0.25 })).toBe(true);
    expect(check({ prompt_id: 'a', rewards: [1, 0], rollout_id: 'a/5' })).toBe(false); // ignored, then counted twice: refused by observe
    expect(check({ prompt_id: 'a', reward: 1, prior_samples: 8 })).toBe(false);
    expect(check({ prompt_id: 'a', rewards: [1], prior_pass_rate: -0.1 })).toBe(false);
  });

  it('plans the CLI writes validate against plan.schema.json', async () => {
    const dir = tempDir('rb-schema-');
    const prompts = join(dir, 'p.jsonl');
    writeFileSync(prompts, '{"id":"a","max_tokens":512}\n{"id":"b"}\n{"id":"c","prompt_tokens":20}\n');
    const check = validator('plan');
    for (const extra of [[], ['--skip', '--policy', 'thompson'], ['--budget-tokens', '9000', '--prefill-weight', '1'], ['--rounds-left', '2']]) {
      const r = await cli(['plan', '--prompts', prompts, '--state', join(dir, 's.db'), '--budget-rollouts', '12', ...extra]);
      expect(r.code, r.stderr).toBe(0);
      const plan = JSON.parse(r.stdout);
      expect(check(plan), JSON.stringify(check.errors)).toBe(true);
    }
    // A later round: prompts with partial_rewards get first_rollout in the plan.
    const later = join(dir, 'p2.jsonl');
    writeFileSync(later, '{"id":"a","partial_rewards":[0,0,0]}\n{"id":"b","partial_rewards":[1,0]}\n{"id":"c"}\n');
    const r = await cli(['plan', '--prompts', later, '--state', join(dir, 's.db'), '--budget-rollouts', '12']);
    expect(r.code, r.stderr).toBe(0);
    const plan = JSON.parse(r.stdout) as { allocations: { prompt_id: string; first_rollout?: number }[] };
    expect(check(plan), JSON.stringify(check.errors)).toBe(true);
    expect(plan.allocations.find((a) => a.prompt_id === 'a')?.first_rollout).toBe(3);
    expect(plan.allocations.find((a) => a.prompt_id === 'c')?.first_rollout).toBeUndefined();
    expect(check({ version: 2 })).toBe(false);
  });
});
