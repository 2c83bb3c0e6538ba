import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { answersMatch, lastBoxed, mathReward, normalizeAnswer, verifierFrom } from '../src/index.js';

const here = import.meta.dirname;

describe('math verifier', () => {
  it('agrees with the Qwen evaluation suite on ≥ 97% of the 400 real responses', () => {
    const rows = readFileSync(join(here, '..', 'fixtures', 'qwen-math100-k8', 'responses.jsonl'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { problem_id: number; sample_idx: number; ground_truth: string; response: string; correct: boolean });
    expect(rows.length).toBe(400);
    const disagreements = rows.filter((r) => (mathReward(r.response, r.ground_truth) === 1) !== r.correct);
    const agreement = 1 - disagreements.length / rows.length;
    console.log(`math verifier agreement with the Qwen labels: ${(agreement * 100).toFixed(2)}% (${rows.length - disagreements.length}/${rows.length})`);
    for (const d of disagreements) {
      console.log(`  disagreement: problem ${d.problem_id} sample ${d.sample_idx}: truth ${JSON.stringify(d.ground_truth)}, boxed ${JSON.stringify(lastBoxed(d.response))}, label ${d.correct}`);
    }
    expect(agreement).toBeGreaterThanOrEqual(0.97);
  });

  it('extracts the last boxed answer, with nested braces, and null when cut off', () => {
    expect(lastBoxed('a \\boxed{1} then \\boxed{\\frac{3}{4}}.')).toBe('\\frac{3}{4}');
    expect(lastBoxed('so \\boxed{\\frac{1}{2')).toBeNull();
    expect(lastBoxed('no answer')).toBeNull();
    expect(lastBoxed('$\\boxed 7$')).toBe('7');
  });

  it.each([
    ['\\dfrac{1}{2}', '\\frac{1}{2}'],
    ['0.5', '\\frac12'],
    ['1/2', '\\frac{1}{2}'],
    ['\\left( 3, 4 \\right)', '(3,4)'],
    ['10\\text{ cm}', '10'],
    ['42.', '42'],
    ['x = 5', '5'],
    ['10{,}000', '10000'],
    ['50,625', '50625'],
    ['12\\frac{3}{5}', '\\frac{63}{5}'],
    ['90^\\circ', '90'],
    ['2.50', '2.5'],
  ])('%s equals %s', (a, b) => {
    expect(answersMatch(a, b)).toBe(true);
  });

  it.each([
    ['\\frac{1}{3}', '0.3'],
    ['4a-2', '4a+2'],
    ['421', '420'],
    ['(3,4)', '(4,3)'],
  ])('%s differs from %s', (a, b) => {
    expect(answersMatch(a, b)).toBe(false);
  });

  it('normalises whitespace and \\left/\\right', () => {
    expect(normalizeAnswer(' \\left[ 1 , 2 \\right] ')).toBe('[1,2]');
  });
});

describe('command verifier', () => {
  it('pipes rollouts as JSONL and reads one reward a line', async () => {
    // The external program gives reward 1 when the response contains the ground truth.
    const script = "import sys,json\nfor l in sys.stdin:\n  r=json.loads(l); print(json.dumps({'reward': 1 if r['ground_truth'] in r['response'] else 0}))";
    const v = verifierFrom(`command:python3 -c "${script.replace(/"/g, '\\"')}"`);
    const rewards = await v.verify([
      { rollout_id: 'a', prompt_id: 'p', prompt: { id: 'p', prompt: 'q', ground_truth: '7' }, response: 'it is 7', finish_reason: 'stop' },
      { rollout_id: 'b', prompt_id: 'p', prompt: { id: 'p', prompt: 'q', ground_truth: '7' }, response: 'it is 8', finish_reason: 'stop' },
    ]);
    expect(rewards).toEqual([1, 0]);
  });

  it('rejects a verifier that prints a bad reward, naming its output line', async () => {
    const v = verifierFrom('command:echo 1.5');
    await expect(v.verify([{ rollout_id: 'a', prompt_id: 'p', prompt: { id: 'p' }, response: '', finish_reason: 'stop' }])).rejects.toThrow(/stdout:1: "reward" must be a number in \[0, 1\], got 1\.5/);
  });

  it('lists the registered verifiers for an unknown name', () => {
    expect(() => verifierFrom('llm-judge')).toThrow(/unknown verifier "llm-judge"; registered: math, command/);
  });
});
