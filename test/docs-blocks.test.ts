// The reader of the docs' code blocks that test/docs-commands.test.ts relies on: which blocks are
// commands, their annotations, and how command lines are cut.
import { describe, expect, it } from 'vitest';
import { blocksOf, commandsOf, inlineSpans } from './docs-blocks.js';
import { portsIn, withPorts } from './docs-run.js';

const doc = [
  'Text with `rollout-budget plan --skip` inline.',
  '',
  '```',
  'rollout-budget sim-server --port 8000 &   # a server',
  '# a comment line',
  'rollout-budget loop --endpoint http://127.0.0.1:8000/v1 \\',
  '  --model sim --steps 4',
  "seq 0 9 | sed 's/#/x/' > p.jsonl",
  'rollout-budget plan --prompts missing.jsonl   # exits 2: no such file',
  '```',
  '',
  '<!-- not run: needs a GPU -->',
  '```sh',
  'vllm run-batch -i in.jsonl -o out.jsonl',
  '```',
  '',
  '<!-- output of: rollout-budget demo -->',
  '```text',
  'totals over 100 steps',
  '```',
  '',
  '   ```text',
  '   +a.b=1',
  '   ```',
].join('\n');

describe('docs-blocks', () => {
  const blocks = blocksOf('x.md', doc);

  it('finds each fenced block with its language, line, annotation and dedented body', () => {
    expect(blocks.map((b) => [b.line, b.lang, b.notRun, b.outputOf])).toEqual([
      [3, '', undefined, undefined],
      [13, 'sh', 'needs a GPU', undefined],
      [18, 'text', undefined, 'rollout-budget demo'],
      [22, 'text', undefined, undefined],
    ]);
    expect(blocks[3]!.body).toEqual(['+a.b=1']);
  });

  it('cuts commands: comments dropped, continuations joined, & for the background, # exits N, # inside quotes kept', () => {
    const commands = commandsOf(blocks[0]!);
    expect(commands.map((c) => [c.line, c.bare, c.background, c.exit])).toEqual([
      [4, 'rollout-budget sim-server --port 8000', true, 0],
      [6, 'rollout-budget loop --endpoint http://127.0.0.1:8000/v1 --model sim --steps 4', false, 0],
      [8, "seq 0 9 | sed 's/#/x/' > p.jsonl", false, 0],
      [9, 'rollout-budget plan --prompts missing.jsonl', false, 2],
    ]);
    expect(commands[1]!.text).toBe('rollout-budget loop --endpoint http://127.0.0.1:8000/v1 \\\n  --model sim --steps 4');
  });

  it('refuses a block that never closes or a command that ends in a continuation', () => {
    expect(() => blocksOf('y.md', '```\nnpm start\n')).toThrow(/y\.md:1: code block never closed/);
    expect(() => commandsOf(blocksOf('z.md', '```\nnpm start \\\n```\n')[0]!)).toThrow(/z\.md:2: the command's last line ends in "\\"/);
  });

  it('reads inline code outside blocks only', () => {
    expect(inlineSpans(doc).map((s) => [s.line, s.code])).toEqual([[1, 'rollout-budget plan --skip']]);
  });

  it('maps every mention of a port the same way, and nothing else', () => {
    const text = commandsOf(blocks[0]!).map((c) => c.bare).join('\n');
    expect(portsIn(text)).toEqual([8000, 8000]);
    expect(withPorts(`${text} --steps 8000`, new Map([[8000, 41234]]))).toContain('--port 41234');
    expect(withPorts(`${text} --steps 8000`, new Map([[8000, 41234]]))).toContain('127.0.0.1:41234/v1');
    expect(withPorts(`${text} --steps 8000`, new Map([[8000, 41234]]))).toContain('--steps 8000');
  });
});
