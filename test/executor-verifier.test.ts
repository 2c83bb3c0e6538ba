import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { MAX_ANSWER_CHARS, answersMatch, lastBoxed, mathReward, normalizeAnswer, verifierFrom } from '../src/index.js';

const here = import.meta.dirname;
const pairs = JSON.parse(readFileSync(join(here, 'verifier', 'math-pairs.json'), 'utf8')) as { equivalent: [string, string, string][]; different: [string, string, string][] };

describe('math verifier', () => {
  it('agrees with the Qwen evaluation suite on ≥ 99% of the 400 real responses', () => {
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
    expect(agreement).toBeGreaterThanOrEqual(0.99);
  });

  it('has a table of at least 60 real answer forms, both ways', () => {
    expect(pairs.equivalent.length + pairs.different.length).toBeGreaterThanOrEqual(60);
    expect(pairs.different.length).toBeGreaterThanOrEqual(20);
  });

  it.each(pairs.equivalent)('%s equals %s (%s), in both directions', (a, b) => {
    expect(answersMatch(a, b)).toBe(true);
    expect(answersMatch(b, a)).toBe(true);
  });

  it.each(pairs.different)('%s differs from %s (%s), in both directions', (a, b) => {
    expect(answersMatch(a, b)).toBe(false);
    expect(answersMatch(b, a)).toBe(false);
  });

  // Issue 12 item 6: these took 23.6 s, 26 s and 11.4 s. Their time is printed by `npm run bench`
  // (no timed assertion here); this checks the answers they get and the documented length cap.
  it('grades adversarial 100 kB answers by the documented cap: no normalisation past MAX_ANSWER_CHARS', () => {
    expect(MAX_ANSWER_CHARS).toBe(1000);
    const spaces = ' '.repeat(100_000);
    expect(mathReward(`\\boxed{\\text{${spaces}1}}`, '1')).toBe(0);
    expect(answersMatch('1', `\\text{${spaces}1}`)).toBe(false);
    expect(mathReward(`\\boxed{1${'.'.repeat(100_000)}x}`, '1')).toBe(0);
    expect(normalizeAnswer(`  ${'a'.repeat(MAX_ANSWER_CHARS + 1)}  `)).toBe('a'.repeat(MAX_ANSWER_CHARS + 1));
    // Under the cap, the same shapes are normalised as usual.
    expect(mathReward(`\\boxed{\\text{${' '.repeat(100)}1}}`, '1')).toBe(1);
    expect(mathReward(`${'x '.repeat(50_000)} so \\boxed{\\frac{\\pi}{2}}.`, '\\pi/2')).toBe(1);
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
    // Node, not python3: the test needs only a program reading stdin, and Node is always here.
    const script = "require('readline').createInterface({input:process.stdin}).on('line',(l)=>{const r=JSON.parse(l);console.log(JSON.stringify({reward:r.response.includes(r.ground_truth)?1:0}))})";
    const v = verifierFrom(`command:'${process.execPath}' -e "${script}"`);
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
