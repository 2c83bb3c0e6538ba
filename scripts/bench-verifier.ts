/**
 * `npm run bench` section: the math verifier on adversarial 100 kB answers (issue 12 item 6;
 * before the fix: 23.6 s, 26 s and 11.4 s on the first three), against a target of < 50 ms each,
 * and on the 400 real responses of fixtures/qwen-math100-k8. `node dist/scripts/bench.js verifier`
 * runs this section alone. Figures only: no test asserts a time.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { answersMatch, mathReward } from '../src/index.js';

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

function time(f: () => unknown, runs: number): { median: number; max: number } {
  const ts: number[] = [];
  for (let r = 0; r < runs; r++) {
    const t0 = performance.now();
    f();
    ts.push(performance.now() - t0);
  }
  return { median: median(ts), max: Math.max(...ts) };
}

export function verifierBench(): void {
  const k100 = 100_000;
  const spaces = ' '.repeat(k100);
  const cases: [string, () => unknown][] = [
    ['\\boxed{\\text{ + 100 kB of spaces + 1}}', () => mathReward(`\\boxed{\\text{${spaces}1}}`, '1')],
    ['ground truth \\text{ + 100 kB of spaces + 1}', () => answersMatch('1', `\\text{${spaces}1}`)],
    ['\\boxed{1 + 100 kB of periods + x}', () => mathReward(`\\boxed{1${'.'.repeat(k100)}x}`, '1')],
    ['\\boxed{ + 100 kB of digits and commas}', () => mathReward(`\\boxed{${'1,'.repeat(k100 / 2)}}`, '1')],
    ['\\boxed{ + 50k nested \\sqrt{}', () => mathReward(`\\boxed{${'\\sqrt{'.repeat(k100 / 6)}2${'}'.repeat(k100 / 6)}}`, '2')],
    ['\\boxed{ + 100 kB of { (unbalanced)', () => mathReward(`\\boxed{${'{'.repeat(k100)}`, '1')],
    ['100 kB of text, then \\boxed{\\frac{\\pi}{2}}', () => mathReward(`${'so we have '.repeat(k100 / 11)} \\boxed{\\frac{\\pi}{2}}`, '\\pi/2')],
    ['\\boxed + 100 kB without a space or $', () => mathReward(`\\boxed ${'7'.repeat(k100)}`, '7')],
    // Just under the normalisation cap (MAX_ANSWER_CHARS = 1000): every rule runs on these.
    ['under the cap: \\text{ + 990 spaces + 1}', () => answersMatch(`\\text{${' '.repeat(990)}1}`, '1')],
    ['under the cap: 1. + 995 zeros + 1 vs 1', () => answersMatch(`1.${'0'.repeat(995)}1`, '1')],
    ['under the cap: 330 nested (', () => answersMatch(`${'('.repeat(330)}1${')'.repeat(330)}`, '1')],
    ['under the cap: 99-element set vs reversed', () => answersMatch(`\\{${Array.from({ length: 99 }, (_, i) => i).join(',')}\\}`, `\\{${Array.from({ length: 99 }, (_, i) => 98 - i).join(',')}\\}`)],
  ];
  console.log('\nmath verifier, adversarial 100 kB answers (target < 50 ms each; 21 runs):');
  console.log('case                                                   median ms   max ms  target');
  for (const [name, f] of cases) {
    const t = time(f, 21);
    console.log(`${name.padEnd(54)} ${t.median.toFixed(3).padStart(9)} ${t.max.toFixed(3).padStart(8)}  ${t.max < 50 ? 'MET' : 'MISSED'}`);
  }
  const root = join(fileURLToPath(import.meta.url), '..', '..', '..');
  const rows = readFileSync(join(root, 'fixtures', 'qwen-math100-k8', 'responses.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { response: string; ground_truth: string });
  const all = time(() => rows.map((r) => mathReward(r.response, r.ground_truth)), 21);
  console.log(`400 real responses (fixtures/qwen-math100-k8): ${all.median.toFixed(2)} ms median for all 400 (${((all.median / 400) * 1000).toFixed(1)} µs each)`);
}
