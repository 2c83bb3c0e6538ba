// Issue 11: `grade` reads the output of an offline batch run (vllm run-batch) back into results
// that `observe` takes. The fixture is built from the shipped real responses
// (scripts/make-batch-fixture.ts); a second output is produced by POSTing the exported batch
// lines to the sim-server (a TEST DOUBLE answering as vLLM's /v1/chat/completions does).
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { cli } from './cli-helpers.js';
import { SimModel, SimServer, defaultSimModel, groupSeed, parseResults, type Plan } from '../src/index.js';
import { expected, simPrompts } from './executor-helpers.js';
import { tempDir } from './temp.js';

const fixture = join(import.meta.dirname, '..', 'fixtures', 'qwen-math100-k8');
let dir: string;
let server: SimServer | undefined;
beforeEach(() => {
  dir = tempDir('rb-grade-');
});
afterEach(async () => {
  await server?.close();
  server = undefined;
});

interface Real {
  problem_id: number;
  sample_idx: number;
  level: string;
  correct: boolean;
}

describe('grade: a vllm run-batch output built from the real responses', () => {
  it('writes one results line per rollout with the plan\'s ids, seeds and groups; rewards agree with the Qwen labels; observe takes them once', async () => {
    const plan = JSON.parse(readFileSync(join(fixture, 'plan.json'), 'utf8')) as Plan;
    const out = join(dir, 'results.jsonl');
    const run = await cli(['grade', '--batch-output', join(fixture, 'batch-output.jsonl'), '--plan', join(fixture, 'plan.json'), '--prompts', join(fixture, 'prompts.jsonl'), '--verifier', 'math', '--out', out]);
    expect(run.code).toBe(0);
    expect(run.stderr).toMatch(/graded 400\/400 rollouts \(aborted 0\), requests 50, tokens 0 \(\+400 rollouts unreported\)/);
    const lines = readFileSync(out, 'utf8').trim().split('\n').map((l) => JSON.parse(l));
    expect(lines.length).toBe(400);
    const real = readFileSync(join(fixture, 'responses.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as Real);
    let agree = 0;
    for (const r of real) {
      const id = String(r.problem_id);
      const line = lines.find((l) => l.rollout_id === `0/${id}#${r.sample_idx}`);
      expect(line).toMatchObject({ prompt_id: id, step: plan.step, finish_reason: 'stop', group: r.level, seed: groupSeed(plan.seed, plan.step, id) + r.sample_idx });
      if ((line.reward === 1) === r.correct) agree++;
    }
    console.log(`grade on the real batch output: ${agree}/400 rewards agree with the Qwen labels`);
    expect(agree / 400).toBeGreaterThanOrEqual(0.99);
    const state = join(dir, 'state.db');
    expect(JSON.parse((await cli(['observe', '--results', out, '--state', state])).stdout)).toMatchObject({ applied: 400, duplicates: 0, aborted: 0, prompts: 50 });
    expect(JSON.parse((await cli(['observe', '--results', out, '--state', state])).stdout)).toMatchObject({ applied: 0, duplicates: 400 });
    // The batch input the fixture answers is the plan's own export: same groups and seeds.
    const input = readFileSync(join(fixture, 'batch-input.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l));
    expect(input.map((b) => [b.custom_id, b.body.seed, b.body.n])).toEqual(plan.allocations.map((a) => [`0/${a.prompt_id}`, groupSeed(plan.seed, 0, a.prompt_id), 8]));
  });
});

describe('grade: outputs shaped as vLLM writes them', () => {
  /** Emulates `vllm run-batch`: each exported line's body POSTed to the sim-server's chat endpoint (non-streaming). */
  async function runBatch(inputPath: string): Promise<string> {
    const lines = readFileSync(inputPath, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { custom_id: string; url: string; body: Record<string, unknown> });
    const output: string[] = [];
    for (const [i, line] of lines.entries()) {
      const res = await fetch(`${server!.url}${line.url}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(line.body) });
      const body = await res.json();
      output.push(JSON.stringify({ id: `vllm-${i}`, custom_id: line.custom_id, response: { status_code: res.status, request_id: `vllm-batch-${i}`, body }, error: null }));
    }
    return `${output.join('\n')}\n`;
  }

  it('reads per-choice token ids, and matches choices to the plan\'s seeds (choice i = seed + i)', async () => {
    const { candidates, sim } = simPrompts(4);
    server = new SimServer({ prompts: sim });
    await server.start();
    const prompts = join(dir, 'prompts.jsonl');
    writeFileSync(prompts, candidates.map((c) => JSON.stringify(c)).join('\n') + '\n');
    const planPath = join(dir, 'plan.json');
    const base = ['plan', '--prompts', prompts, '--state', join(dir, 's.db'), '--budget-rollouts', '20', '--seed', '5', '--max-tokens', '4000'];
    expect((await cli([...base, '--out', planPath])).code).toBe(0);
    const inputPath = join(dir, 'batch-input.jsonl');
    expect((await cli([...base, '--format', 'vllm-batch', '--model', 'sim', '--out', inputPath])).code).toBe(0);
    const outputPath = join(dir, 'batch-output.jsonl');
    writeFileSync(outputPath, await runBatch(inputPath));
    const run = await cli(['grade', '--batch-output', outputPath, '--plan', planPath, '--prompts', prompts]);
    expect(run.code).toBe(0);
    expect(parseResults(run.stdout, 'results').results.length).toBe(20); // observe takes it
    const results = run.stdout.trim().split('\n').map((l) => JSON.parse(l) as { prompt_id: string; rollout_id: string; seed: number; tokens: number; reward: number; finish_reason: string });
    expect(results.length).toBe(20);
    const model = new SimModel(defaultSimModel);
    for (const r of results) {
      const want = expected(model, sim.find((p) => p.id === r.prompt_id)!, r.seed, 4000);
      expect([r.tokens, r.reward, r.finish_reason]).toEqual([want.tokens, want.reward, want.finish]);
      expect(r.seed).toBe(groupSeed(5, 0, r.prompt_id) + Number(r.rollout_id.split('#')[1]));
    }
    expect(run.stderr).toMatch(/graded 20\/20 rollouts/);
  });

  it('a failed request writes its rollouts as aborted; abort and repetition choices are mapped as execute maps them', async () => {
    const plan = JSON.parse(readFileSync(join(fixture, 'plan.json'), 'utf8')) as Plan;
    const lines = readFileSync(join(fixture, 'batch-output.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l));
    lines[0] = { id: 'vllm-x', custom_id: lines[0].custom_id, response: { status_code: 400, request_id: 'vllm-batch-x' }, error: 'The model does not support Chat Completions API' };
    lines[1].response.body.choices[0].finish_reason = 'abort';
    lines[1].response.body.choices[1].finish_reason = 'repetition';
    lines.splice(2, 1); // a group the batch never answered
    const outputPath = join(dir, 'out.jsonl');
    writeFileSync(outputPath, lines.map((l) => JSON.stringify(l)).join('\n') + '\n');
    const run = await cli(['grade', '--batch-output', outputPath, '--plan', join(fixture, 'plan.json'), '--prompts', join(fixture, 'prompts.jsonl')]);
    expect(run.code).toBe(0);
    const results = run.stdout.trim().split('\n').map((l) => JSON.parse(l));
    expect(results.length).toBe(392);
    const first = plan.allocations[0]!.prompt_id;
    const second = plan.allocations[1]!.prompt_id;
    expect(results.filter((r) => r.prompt_id === first).every((r) => r.finish_reason === 'abort' && r.reward === 0)).toBe(true);
    expect(results.find((r) => r.rollout_id === `0/${second}#0`)).toMatchObject({ finish_reason: 'abort', server_finish_reason: 'abort', reward: 0 });
    expect(results.find((r) => r.rollout_id === `0/${second}#1`)).toMatchObject({ finish_reason: 'length', server_finish_reason: 'repetition' });
    expect(run.stderr).toMatch(/graded 383\/400 rollouts \(aborted 9\), requests 49 \(failed 1: their rollouts written as abort; first: .*out\.jsonl:1: "The model does not support/);
    expect(run.stderr).toMatch(/1 plan groups have no line in the batch output/);
    expect(run.stderr).toMatch(/server finish reasons: abort 1 \(aborted, resumable\), repetition 1 \(graded as length\)/);
    // Every line, server_finish_reason included, is a results line of the published schema.
    const check = new Ajv2020({ strict: false }).compile(JSON.parse(readFileSync(join(import.meta.dirname, '..', 'schemas', 'results.schema.json'), 'utf8')));
    for (const r of results) expect(check(r), JSON.stringify(check.errors)).toBe(true);
    expect(check({ ...results[0], server_finish_reason: '' })).toBe(false);
  });

  it('a request vLLM refused as longer than its context: its rollouts aborted with server_finish_reason context_length, as execute writes them', async () => {
    const plan = JSON.parse(readFileSync(join(fixture, 'plan.json'), 'utf8')) as Plan;
    const lines = readFileSync(join(fixture, 'batch-output.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l));
    // vllm/entrypoints/openai/run_batch.py writes a failed request's ErrorResponse as the body, status 400.
    const message = "'max_tokens' or 'max_completion_tokens' is too large: 4096. This model's maximum context length is 4096 tokens and your request has 212 input tokens (4096 > 4096 - 212).";
    lines[0] = { id: 'vllm-x', custom_id: lines[0].custom_id, response: { status_code: 400, request_id: 'vllm-batch-x', body: { object: 'error', message, type: 'BadRequestError', param: null, code: 400 } }, error: null };
    const outputPath = join(dir, 'out-too-long.jsonl');
    writeFileSync(outputPath, lines.map((l) => JSON.stringify(l)).join('\n') + '\n');
    const run = await cli(['grade', '--batch-output', outputPath, '--plan', join(fixture, 'plan.json'), '--prompts', join(fixture, 'prompts.jsonl')]);
    expect(run.code).toBe(0);
    const results = run.stdout.trim().split('\n').map((l) => JSON.parse(l));
    const first = plan.allocations[0]!;
    const refused = results.filter((r) => r.prompt_id === first.prompt_id);
    expect(refused).toHaveLength(first.n);
    expect(refused.every((r) => r.finish_reason === 'abort' && r.server_finish_reason === 'context_length' && r.reward === 0)).toBe(true);
    expect(run.stderr).toContain(`server finish reasons: context_length ${first.n} (refused by the server: prompt and max_tokens beyond its context; not generated)`);
  });

  it.each([
    [(l: any) => (l.custom_id = '0/nope'), /out\.jsonl:1: "custom_id" "0\/nope" is not a group of .*plan\.json \(step 0\)/],
    [(l: any) => (l.response.body.choices[0].index = 8), /out\.jsonl:1: "response\.body\.choices\[0\]\.index" must be an integer in \[0, 8\) \(the plan's n for "0\/0"\), got 8/],
    [(l: any) => (l.response.body.choices = 'none'), /out\.jsonl:1: "response\.body\.choices" must be an array, got "none"/],
    // Read before as completions without text: every rollout graded 0, exit 0.
    [(l: any) => (l.response.body.object = 'weird'), /out\.jsonl:1: "response\.body\.object" must be "text_completion" or "chat\.completion" .*, got "weird"/],
    // Reported as null before.
    [(l: any) => (l.response.body.choices[0].finish_reason = 5), /out\.jsonl:1: "response\.body\.choices\[0\]\.finish_reason" must be a string or null, got 5/],
    [(l: any) => ((l.response.body.object = 'text_completion'), (l.response.body.choices[0].text = null)), /out\.jsonl:1: "response\.body\.choices\[0\]\.text" must be a string, got null/],
  ])('bad batch output: exit 2 naming file:line and field, and no results file (%#)', async (mutate, message) => {
    const lines = readFileSync(join(fixture, 'batch-output.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l));
    mutate(lines[0]);
    const outputPath = join(dir, 'out.jsonl');
    writeFileSync(outputPath, lines.map((l) => JSON.stringify(l)).join('\n') + '\n');
    const results = join(dir, 'results.jsonl');
    const run = await cli(['grade', '--batch-output', outputPath, '--plan', join(fixture, 'plan.json'), '--prompts', join(fixture, 'prompts.jsonl'), '--out', results]);
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(message);
    expect(run.stderr.trim().split('\n').length).toBe(1);
    expect(existsSync(results)).toBe(false);
  });

  it('the batch input given as --batch-output is exit 2 saying so, not every rollout written as aborted', async () => {
    const results = join(dir, 'results.jsonl');
    const run = await cli(['grade', '--batch-output', join(fixture, 'batch-input.jsonl'), '--plan', join(fixture, 'plan.json'), '--prompts', join(fixture, 'prompts.jsonl'), '--out', results]);
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/batch-input\.jsonl:1: no "response" and no "error": this is a request \(it has "url" or "body"\), a line of the batch input; pass the file `vllm run-batch -o` wrote, not its -i\n$/);
    expect(existsSync(results)).toBe(false);
    const other = join(dir, 'other.jsonl');
    writeFileSync(other, '{"custom_id":"0/0","choices":[]}\n');
    const run2 = await cli(['grade', '--batch-output', other, '--plan', join(fixture, 'plan.json'), '--prompts', join(fixture, 'prompts.jsonl')]);
    expect(run2.code).toBe(2);
    expect(run2.stderr).toMatch(/other\.jsonl:1: no "response" and no "error": not a line of a `vllm run-batch` output\n$/);
  });

  it('a repeated custom_id names both lines', async () => {
    const lines = readFileSync(join(fixture, 'batch-output.jsonl'), 'utf8').trim().split('\n');
    const outputPath = join(dir, 'out.jsonl');
    writeFileSync(outputPath, [lines[0], lines[1], lines[0]].join('\n') + '\n');
    const run = await cli(['grade', '--batch-output', outputPath, '--plan', join(fixture, 'plan.json'), '--prompts', join(fixture, 'prompts.jsonl')]);
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/out\.jsonl:3: "custom_id" "0\/0" repeats line 1/);
  });

  it('a content that is not text and a negative token count are named; choices left out are said in the summary', async () => {
    const lines = () => readFileSync(join(fixture, 'batch-output.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l));
    const grade = async (edit: (l: any[]) => void) => {
      const l = lines();
      edit(l);
      const outputPath = join(dir, 'out-odd.jsonl');
      writeFileSync(outputPath, l.map((x) => JSON.stringify(x)).join('\n') + '\n');
      return cli(['grade', '--batch-output', outputPath, '--plan', join(fixture, 'plan.json'), '--prompts', join(fixture, 'prompts.jsonl')]);
    };
    // A number as content was graded as an empty answer: reward 0, finish "stop", exit 0.
    const number = await grade((l) => void (l[0].response.body.choices[0].message.content = 5));
    expect(number.code).toBe(2);
    expect(number.stderr).toMatch(/out-odd\.jsonl:1: "response\.body\.choices\[0\]\.message\.content" must be a string or null, got 5/);
    const negative = await grade((l) => void (l[0].response.body.usage = { completion_tokens: -7 }));
    expect(negative.code).toBe(2);
    expect(negative.stderr).toMatch(/out-odd\.jsonl:1: "response\.body\.usage\.completion_tokens" must be a non-negative integer, got -7/);
    const empty = await grade((l) => void (l[0].response.body.choices = []));
    expect(empty.code).toBe(0);
    expect(empty.stderr).toMatch(/, 8 choices missing from their answers \(written as abort; first: .*out-odd\.jsonl:1\)/);
  });
});
