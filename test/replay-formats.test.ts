import { createHash } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { RolloutBudgetError, loadLog } from '../src/index.js';
import { tempDir } from './temp.js';

const dir = () => tempDir('rb-formats-');

async function rejection(promise: Promise<unknown>): Promise<RolloutBudgetError> {
  try {
    await promise;
  } catch (error) {
    expect(error).toBeInstanceOf(RolloutBudgetError);
    return error as RolloutBudgetError;
  }
  throw new Error('expected a rejection');
}

describe('log formats', () => {
  it('reads per-visit group counts (the shipped fixture format)', async () => {
    const d = dir();
    const path = join(d, 'visits.jsonl');
    writeFileSync(path, '{"step": 0, "prompt_id": "3", "n": 8, "correct": 2}\n\n{"step": 1, "prompt_id": 4, "n": 8, "correct": 8}\n');
    const { visits, format } = await loadLog(path);
    expect(format).toBe('visits');
    expect(visits).toEqual([
      { step: 0, prompt_id: '3', n: 8, correct: 2 },
      { step: 1, prompt_id: '4', n: 8, correct: 8 },
    ]);
  });

  it('reads observe results, per rollout and per group, with tokens', async () => {
    const d = dir();
    const path = join(d, 'results.jsonl');
    writeFileSync(
      path,
      [
        '{"prompt_id": "a", "step": 3, "reward": 1, "tokens": 100}',
        '{"prompt_id": "a", "step": 3, "reward": 0, "tokens": 300}',
        '{"prompt_id": "a", "step": 3, "reward": 0, "finish_reason": "abort"}',
        '{"prompt_id": "b", "step": 3, "rewards": [0, 0, 1], "tokens": [5, 6, 7]}',
      ].join('\n'),
    );
    const { visits, format } = await loadLog(path);
    expect(format).toBe('results');
    const a = visits.find((v) => v.prompt_id === 'a')!;
    const b = visits.find((v) => v.prompt_id === 'b')!;
    expect([a.n, a.correct, a.rewards, a.tokens]).toEqual([2, 1, [1, 0], [100, 300]]);
    expect([b.n, b.correct, b.rewards, b.tokens]).toEqual([3, 1, [0, 0, 1], [5, 6, 7]]);
  });

  it('reads a verl rollout dump folder (one <step>.jsonl per step), keyed by a hash of the input', async () => {
    const d = join(dir(), 'rollout_data');
    mkdirSync(d);
    const inputs = ['<|user|>What is 1+1?', '<|user|>Prove Fermat.'];
    const line = (input: string, score: number, step: number) =>
      JSON.stringify({ input, output: `answer ${score}`, gts: '2', score, step, acc: score > 0 });
    // verl writes steps from 1 (global_steps); 10.jsonl must sort after 2.jsonl
    writeFileSync(join(d, '2.jsonl'), [line(inputs[0]!, 1, 2), line(inputs[0]!, 0, 2), line(inputs[1]!, 0, 2)].join('\n') + '\n');
    writeFileSync(join(d, '10.jsonl'), [line(inputs[0]!, 1, 10), line(inputs[1]!, 1.0, 10), line(inputs[1]!, -1, 10)].join('\n') + '\n');
    const { visits, format } = await loadLog(d);
    expect(format).toBe('verl');
    const id = (s: string) => `verl:${createHash('sha256').update(s).digest('hex').slice(0, 16)}`;
    const at = (step: number, i: number) => visits.find((v) => v.step === step && v.prompt_id === id(inputs[i]!))!;
    expect([at(2, 0).n, at(2, 0).correct]).toEqual([2, 1]);
    expect([at(2, 1).n, at(2, 1).correct]).toEqual([1, 0]);
    expect([at(10, 1).n, at(10, 1).correct]).toEqual([2, 1]);
    expect(visits.map((v) => v.step)).toEqual([2, 2, 10, 10]);
  });

  it.each([
    ['visits', '{"step": 0, "prompt_id": "1", "n": 8, "correct": 2}\n{"step": 0, "prompt_id": "2", "n": 8, "correct": 9}\n', ':2', '"correct"'],
    ['visits', '{"step": 0, "prompt_id": "1", "n": 8, "correct": 2}\n{"step": 0, "prompt_id": "2", "n": 8, \n', ':2', 'malformed JSON'],
    ['results', '{"prompt_id": "a", "step": 0, "reward": 1}\n{"prompt_id": "a", "step": 0, "reward": 7}\n', ':2', '"reward"'],
    ['results', '{"prompt_id": "a", "step": 0, "reward": 1}\n{"prompt_id": "a", "reward": 1}\n', ':2', '"step" is required'],
    ['results', '{"prompt_id": "a", "step": 0, "reward": 1}\n{"prompt_id": "a", "step": 0, "rewards": [1, 0], "tokens": [3]}\n', ':2', '"tokens" must be an array as long as "rewards" (2)'],
    ['results', '{"prompt_id": "a", "step": 0, "reward": 1}\n{"prompt_id": "a", "step": 0, "rewards": [1, 0], "tokens": [3, -1]}\n', ':2', '"tokens[1]" must be a non-negative integer'],
    ['results', '{"prompt_id": "a", "step": 0, "reward": 1}\n{"prompt_id": "a", "step": 0, "rewards": [1, 2]}\n', ':2', '"rewards[1]" must be a number in [0, 1]'],
    ['verl', '{"input": "x", "output": "y", "score": 1, "step": 1}\n{"input": "x", "output": "y", "score": "high", "step": 1}\n', ':2', '"score"'],
  ])('a malformed %s line is an error naming file:line (%#)', async (_format, text, line, what) => {
    const d = dir();
    const path = join(d, 'log.jsonl');
    writeFileSync(path, text);
    const error = await rejection(loadLog(path));
    expect(error.code).toBe('BAD_INPUT');
    expect(error.exitCode).toBe(2);
    expect(error.message).toContain(`${path}${line}:`);
    expect(error.message).toContain(what);
  });

  it('says which formats it knows when it cannot tell', async () => {
    const d = dir();
    const path = join(d, 'log.jsonl');
    writeFileSync(path, '{"hello": 1}\n');
    const error = await rejection(loadLog(path));
    expect(error.message).toContain(`${path}:1`);
    expect(error.message).toContain('--format');
  });
});
