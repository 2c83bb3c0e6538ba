/**
 * Builds the offline-batch fixture of fixtures/qwen-math100-k8 from its real responses
 * (`node dist/scripts/make-batch-fixture.js`, after `npm run build`; see fixtures/README.md):
 *
 * - prompts.jsonl: one line per problem, `{id, prompt, ground_truth, group}` — the MATH question
 *   as the Qwen2.5-Math evaluation gave it, its ground truth, and its MATH level as the group;
 * - plan.json: `rollout-budget plan` with 8 rollouts per problem (the 8 real samples), seed 0;
 * - batch-input.jsonl: `plan --format vllm-batch`, what `vllm run-batch -i` would read;
 * - batch-output.jsonl: what `vllm run-batch -o` writes for it (run_batch.py
 *   `BatchRequestOutput`), with choice i = the real response of sample i, finish_reason "stop"
 *   (every response ends its answer), usage.completion_tokens = the sum of the real Qwen2.5
 *   token counts. Constructed, not recorded: the ids and `created` (stable hashes), and no
 *   per-choice `token_ids` (the source has no token ids; vLLM before 0.10.2 answers this way).
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { runCli } from '../src/cli/main.js';
import { fnv1a } from '../src/index.js';

const root = join(fileURLToPath(import.meta.url), '..', '..', '..');
const dir = join(root, 'fixtures', 'qwen-math100-k8');
const MODEL = 'Qwen2.5-Math-Instruct';

interface Response {
  problem_id: number;
  sample_idx: number;
  question: string;
  ground_truth: string;
  level: string;
  response: string;
  correct: boolean;
  response_tokens: number;
}

async function cli(args: string[]): Promise<string> {
  let out = '';
  let err = '';
  const code = await runCli(args, { stdout: (t) => void (out += t), stderr: (t) => void (err += t), readStdin: async () => '', stderrIsTty: false });
  if (code !== 0) throw new Error(`rollout-budget ${args.join(' ')}: exit ${code}: ${err}`);
  return out;
}

const hex = (s: string) => fnv1a(s).toString(16).padStart(8, '0');

async function main(): Promise<void> {
  const rows = readFileSync(join(dir, 'responses.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as Response);
  const byProblem = new Map<number, Response[]>();
  for (const r of rows) byProblem.set(r.problem_id, [...(byProblem.get(r.problem_id) ?? []), r]);
  const prompts = [...byProblem.values()].map((rs) => ({ id: String(rs[0]!.problem_id), prompt: rs[0]!.question, ground_truth: rs[0]!.ground_truth, group: rs[0]!.level }));
  writeFileSync(join(dir, 'prompts.jsonl'), prompts.map((p) => `${JSON.stringify(p)}\n`).join(''));

  const tmp = mkdtempSync(join(tmpdir(), 'rb-fixture-'));
  try {
    const common = ['plan', '--prompts', join(dir, 'prompts.jsonl'), '--state', join(tmp, 'state.db'), '--budget-rollouts', String(rows.length), '--min-n', '8', '--max-n', '8', '--seed', '0', '--max-tokens', '4096'];
    writeFileSync(join(dir, 'plan.json'), await cli(common));
    const input = await cli([...common, '--format', 'vllm-batch', '--model', MODEL]);
    writeFileSync(join(dir, 'batch-input.jsonl'), input);
    const output = input.trim().split('\n').map((line) => {
      const request = JSON.parse(line) as { custom_id: string };
      const problem = Number(request.custom_id.split('/')[1]);
      const samples = [...byProblem.get(problem)!].sort((a, b) => a.sample_idx - b.sample_idx);
      return JSON.stringify({
        id: `vllm-${hex(`out/${request.custom_id}`)}`,
        custom_id: request.custom_id,
        response: {
          status_code: 200,
          request_id: `vllm-batch-${hex(`req/${request.custom_id}`)}`,
          body: {
            id: `chatcmpl-${hex(`body/${request.custom_id}`)}`,
            object: 'chat.completion',
            created: 1735689600,
            model: MODEL,
            choices: samples.map((s, index) => ({ index, message: { role: 'assistant', content: s.response, tool_calls: [] }, logprobs: null, finish_reason: 'stop', stop_reason: null })),
            usage: { completion_tokens: samples.reduce((t, s) => t + s.response_tokens, 0) },
          },
        },
        error: null,
      });
    });
    writeFileSync(join(dir, 'batch-output.jsonl'), `${output.join('\n')}\n`);
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
  console.log(`wrote ${prompts.length} prompts, a plan of ${rows.length} rollouts, batch-input.jsonl and batch-output.jsonl in ${dir}`);
}

await main();
