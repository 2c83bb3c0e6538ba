// A server started with --api-key (vLLM, SGLang) answers 401 {"error": "Unauthorized"} to a
// request without "Authorization: Bearer <key>". `execute` and `loop` could send no key: with
// --server auto the 401 of GET /v1/models read as "does not name vLLM or SGLang" (a note, and
// the openai profile), then every request failed "HTTP 401". Now --api-key (default
// $OPENAI_API_KEY) is sent with every request, and a 401 says what to give. The servers are the
// sim-server's profiles, a TEST DOUBLE for a GPU inference server: with `apiKey` it answers as
// vLLM's AuthenticationMiddleware (vllm/entrypoints/openai/api_server.py) and SGLang's
// add_api_key_middleware (sglang/srt/utils.py) do.
import { existsSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { cli } from './cli-helpers.js';
import { planOf, simPrompts, simServers } from './executor-helpers.js';
import { tempDir } from './temp.js';

const serve = simServers();
const KEY = 'token-abc123';

const saved = process.env.OPENAI_API_KEY;
afterEach(() => {
  if (saved === undefined) delete process.env.OPENAI_API_KEY;
  else process.env.OPENAI_API_KEY = saved;
});

async function setup(profile: 'vllm' | 'sglang' = 'vllm') {
  const dir = tempDir();
  const { candidates, sim } = simPrompts(2);
  const server = await serve({ prompts: sim, profile, apiKey: KEY });
  const prompts = join(dir, 'prompts.jsonl');
  writeFileSync(prompts, candidates.map((c) => JSON.stringify(c)).join('\n'));
  const plan = join(dir, 'plan.json');
  writeFileSync(plan, JSON.stringify(planOf({ q0: 2, q1: 2 }, { maxTokens: 256 })));
  const execute = (...flags: string[]) =>
    cli(['execute', '--plan', plan, '--prompts', prompts, '--endpoint', `${server.url}/v1`, '--model', 'sim', '--state', join(dir, 'state.db'), '--out', join(dir, 'results.jsonl'), ...flags]);
  return { dir, server, execute };
}

describe('a server started with --api-key', () => {
  it.each(['vllm', 'sglang'] as const)('%s: --api-key, or $OPENAI_API_KEY, is sent with every request and the plan is generated', async (profile) => {
    delete process.env.OPENAI_API_KEY;
    const s = await setup(profile);
    const run = await s.execute('--api-key', KEY);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stderr).not.toContain('does not name vLLM or SGLang'); // /v1/models answered with the key
    expect(s.server.stats.completedChoices).toBe(4);
    process.env.OPENAI_API_KEY = KEY;
    const fromEnv = await s.execute();
    expect(fromEnv.code, fromEnv.stderr).toBe(0);
    expect(s.server.stats.completedChoices).toBe(8);
  });

  it('without a key: exit 2 naming --api-key and $OPENAI_API_KEY, before any rollout; no state file is left', async () => {
    delete process.env.OPENAI_API_KEY;
    const s = await setup();
    const run = await s.execute();
    expect(run.code).toBe(2);
    expect(run.stderr).toContain(`HTTP 401 from ${s.server.url}/v1/models: {"error":"Unauthorized"}: the server wants an API key (vLLM and SGLang started with --api-key): give it with --api-key or $OPENAI_API_KEY`);
    expect(s.server.stats.requests).toBe(0);
    expect(readdirSync(s.dir).sort()).toEqual(['plan.json', 'prompts.jsonl']);
    // With --server given, no /v1/models is asked: the first generation request's 401 ends the run, not retried.
    const named = await s.execute('--server', 'vllm');
    expect(named.code).toBe(2);
    expect(named.stderr).toContain(`generation failed: HTTP 401 from ${s.server.url}/v1/completions: {"error":"Unauthorized"}: the server wants an API key`);
    expect(named.stderr).not.toMatch(/gave up after/);
  });

  it('a wrong key is named as refused and never printed; a key a header cannot carry is refused before any request', async () => {
    const s = await setup();
    process.env.OPENAI_API_KEY = 'not-the-key';
    const wrong = await s.execute();
    expect(wrong.code).toBe(2);
    expect(wrong.stderr).toContain('the server refused the API key given (--api-key, else $OPENAI_API_KEY): give the key the server was started with');
    expect(wrong.stderr).not.toContain('not-the-key');
    for (const [flags, says] of [
      [['--api-key', 'token abc'], '--api-key holds a character an HTTP header cannot carry (a space, a control character or non-ASCII) at position 6 of 9'],
      [['--api-key', ''], '--api-key is empty'],
    ] as const) {
      const run = await s.execute(...flags);
      expect(run.code, flags.join(' ')).toBe(2);
      expect(run.stderr).toContain(says);
    }
    expect(s.server.stats.requests).toBe(0);
    expect(existsSync(join(s.dir, 'state.db'))).toBe(false);
  });
});
