import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { cli } from './cli-helpers.js';
import { tempDir } from './temp.js';

// `plan` reads the prompts with `lines`, a getter that builds a map of every prompt's
// `file:line` for error messages. Only the request exports (vllm-batch, sglang) name a prompt's
// line; built for a 10⁶-prompt json plan, that map took ~180 MB and ~0.5 s (fixed in 1ddccb9).
// The reader is wrapped here to count who asks for it.
const asked = vi.hoisted(() => ({ lines: 0 }));
vi.mock('../src/cli/prompts-input.js', async (original) => {
  const real = await original<typeof import('../src/cli/prompts-input.js')>();
  return {
    ...real,
    readPrompts: async (...args: Parameters<typeof real.readPrompts>) => {
      const read = await real.readPrompts(...args);
      const parsed = read.parsed;
      return {
        ...read,
        parsed: {
          candidates: parsed.candidates,
          get lines() {
            asked.lines++;
            return parsed.lines;
          },
        },
      };
    },
  };
});

describe('plan asks for the prompts\' file:line map only where it writes requests', () => {
  it('json and jsonl: never; vllm-batch and sglang: once each', async () => {
    const dir = tempDir('rb-prompt-lines-');
    const prompts = join(dir, 'prompts.jsonl');
    writeFileSync(prompts, Array.from({ length: 20 }, (_, i) => JSON.stringify({ id: `p${i}`, prompt: `question ${i}` })).join('\n'));
    const plan = (format: string) => cli(['plan', '--prompts', prompts, '--state', join(dir, 'state.db'), '--budget-rollouts', '80', '--max-tokens', '256', '--model', 'm', '--format', format, '--out', join(dir, `plan.${format}`)]);
    for (const format of ['json', 'jsonl']) {
      const run = await plan(format);
      expect(run.code, run.stderr).toBe(0);
    }
    expect(asked.lines).toBe(0);
    for (const [k, format] of ['vllm-batch', 'sglang'].entries()) {
      const run = await plan(format);
      expect(run.code, run.stderr).toBe(0);
      expect(asked.lines).toBe(k + 1);
    }
  });
});
