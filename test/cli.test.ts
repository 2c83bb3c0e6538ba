import { readFileSync, writeFileSync, existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import seedrandom from 'seedrandom';
import { describe, expect, it } from 'vitest';
import { LoggedRun, drawOutcomes, parseVisits, readText, type Plan } from '../src/index.js';
import { cli } from './cli-helpers.js';
import { tempDir } from './temp.js';

const fixture = (...p: string[]) => join(import.meta.dirname, '..', 'fixtures', ...p);

function workdir() {
  const dir = tempDir('rb-cli-');
  const state = join(dir, 'state.db');
  const prompts = join(dir, 'prompts.jsonl');
  writeFileSync(prompts, '{"id":"a","prompt_tokens":10}\n{"id":"b","max_tokens":4096}\n{"id":"c","group":"g","extra":{"kept":true}}\n');
  return { dir, state, prompts };
}

describe('CLI bad input: exit 2, one message with file:line, field and value, state untouched', () => {
  const cases: [string, string, RegExp][] = [
    ['malformed JSON', '{"prompt_id":"a","reward":1}\n{"prompt_id": "b", reward: 1}\n', /results\.jsonl:2: malformed JSON .*"\{\\"prompt_id\\": \\"b\\", reward: 1\}"/],
    ['missing field', '{"prompt_id":"a"}\n', /results\.jsonl:1: "reward" is required/],
    ['mistyped field', '{"prompt_id":"a","reward":"1"}\n', /results\.jsonl:1: "reward" must be a number in \[0, 1\], got "1"/],
    ['NaN', '{"prompt_id":"a","reward":NaN}\n', /results\.jsonl:1: malformed JSON/],
    ['NaN as text', '{"prompt_id":"a","reward":"NaN"}\n', /results\.jsonl:1: "reward" must be a number in \[0, 1\], got "NaN"/],
    ['an id too long to store', `{"prompt_id":"${'x'.repeat(70_000)}","reward":1}\n`, /results\.jsonl:1: "prompt_id" is 70000 characters long: at most 65536 are stored, got "x{20}/],
    ['a rollout_id too long to store', `{"prompt_id":"a","reward":1,"rollout_id":"${'r'.repeat(65_601)}"}\n`, /results\.jsonl:1: "rollout_id" is 65601 characters long: at most 65600 are stored, got "r{20}/],
    ['a rollout_id on a group line', '{"prompt_id":"a","rewards":[1,0],"rollout_id":"a/5"}\n', /results\.jsonl:1: "rollout_id" "a\/5" on a group line \("rewards"\), which has no single rollout to name/],
    ['negative tokens', '{"prompt_id":"a","reward":1}\n{"prompt_id":"a","reward":0,"tokens":-3}\n', /results\.jsonl:2: "tokens" must be a non-negative integer, got -3/],
    ['reward outside [0,1]', '{"prompt_id":"a","reward":1.5}\n', /results\.jsonl:1: "reward" must be a number in \[0, 1\], got 1\.5/],
    ['bad finish_reason', '{"prompt_id":"a","reward":1,"finish_reason":"done"}\n', /"finish_reason" must be "stop", "length" or "abort", got "done"/],
    ['bad finish_reason on a group line', '{"prompt_id":"a","rewards":[1,0],"finish_reason":"eos"}\n', /results\.jsonl:1: "finish_reason" must be "stop", "length" or "abort", got "eos"/],
    ['group tokens mismatch', '{"prompt_id":"a","rewards":[1,0],"tokens":[3]}\n', /results\.jsonl:1: "tokens" must be an array as long as "rewards" \(2\), got \[3\]/],
    ['empty prompt id', '{"prompt_id":"","reward":1}\n', /results\.jsonl:1: "prompt_id" must be a non-empty string, got ""/],
  ];
  for (const [name, text, message] of cases) {
    it(name, async () => {
      const w = workdir();
      const ok = await cli(['observe', '--results', '-', '--state', w.state], '{"prompt_id":"z","reward":1}\n');
      expect(ok.code).toBe(0);
      const before = readFileSync(w.state).length;
      const inspectBefore = (await cli(['inspect', '--state', w.state, '--prompt', 'a'])).stdout;
      const file = join(w.dir, 'results.jsonl');
      writeFileSync(file, text);
      const r = await cli(['observe', '--results', file, '--state', w.state]);
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(message);
      expect(r.stderr.trim().split('\n')).toHaveLength(1);
      expect(r.stderr).not.toMatch(/\n\s+at /);
      expect(r.stdout).toBe('');
      expect((await cli(['inspect', '--state', w.state, '--prompt', 'a'])).stdout).toBe(inspectBefore);
      expect(readFileSync(w.state).length).toBe(before);
    });
  }

  it('bad prompts: duplicate id, bad max_tokens', async () => {
    const w = workdir();
    writeFileSync(w.prompts, '{"id":"a"}\n\n{"id":"a"}\n');
    let r = await cli(['plan', '--prompts', w.prompts, '--state', w.state, '--budget-rollouts', '8']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/prompts\.jsonl:3: "id" "a" repeats line 1/);
    writeFileSync(w.prompts, '{"id":"a","max_tokens":-3}\n');
    r = await cli(['plan', '--prompts', w.prompts, '--state', w.state, '--budget-rollouts', '8']);
    expect(r.stderr).toMatch(/prompts\.jsonl:1: "max_tokens" must be a positive integer, got -3/);
    // A 100 MB id was stored (a 210 MB state), and every plan after it took 0.6 GB and seconds.
    writeFileSync(w.prompts, `{"id":"a"}\n{"id":"${'y'.repeat(65_537)}"}\n`);
    r = await cli(['plan', '--prompts', w.prompts, '--state', w.state, '--budget-rollouts', '8']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/prompts\.jsonl:2: "id" is 65537 characters long: at most 65536 are stored/);
    // A folder for a file, or for the state: the code alone, or SQLite's "unable to open database file".
    r = await cli(['plan', '--prompts', w.dir, '--state', w.state, '--budget-rollouts', '8']);
    expect(r.stderr).toBe(`rollout-budget: ${w.dir}: cannot read (EISDIR: it is a folder, not a file)\n`);
    writeFileSync(w.prompts, '{"id":"a"}\n');
    r = await cli(['plan', '--prompts', w.prompts, '--state', w.dir, '--budget-rollouts', '8']);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(`rollout-budget: ${w.dir}: cannot open the state database (unable to open database file: it is a folder; give the path of a state file, e.g. ${join(w.dir, 'rollout-budget.db')})\n`);
    // A folder that is not there (docs/trainers.md's `serve --state runs/budget.db` on a fresh
    // clone): named, and how to make it (SQLite's words alone named neither).
    const missing = join(w.dir, 'no such runs', 'budget.db');
    r = await cli(['plan', '--prompts', w.prompts, '--state', missing, '--budget-rollouts', '8']);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(`rollout-budget: ${missing}: cannot open the state database (Cannot open database because the directory does not exist: there is no folder ${dirname(missing)}; make it first (mkdir -p '${dirname(missing)}'))\n`);
    // --min-n above --max-n's default, --max-n not given: --min-n is named (it said "--max-n must be
    // an integer ≥ 100, got 64", a flag the user never gave); given, --max-n is.
    r = await cli(['plan', '--prompts', w.prompts, '--state', ':memory:', '--budget-rollouts', '1000', '--min-n', '100']);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe("rollout-budget: --min-n 100 is above --max-n's default of 64: give --max-n too (at least 100)\n");
    r = await cli(['plan', '--prompts', w.prompts, '--state', ':memory:', '--budget-rollouts', '1000', '--min-n', '100', '--max-n', '64']);
    expect(r.stderr).toBe('rollout-budget: --max-n must be an integer ≥ 100, got 64\n');
    // A file where a folder of the path should be: exit 2 naming it (it crashed with ENOTDIR's stack, exit 1).
    for (const [args, said] of [
      [['plan', '--prompts', w.prompts, '--state', join(w.prompts, 'x.db'), '--budget-rollouts', '8'], `${join(w.prompts, 'x.db')}: cannot open the state database (unable to open database file: ${w.prompts} is a file, not a folder)`],
      [['plan', '--prompts', w.prompts, '--state', join(w.prompts, 'sub', 'x.db'), '--budget-rollouts', '8'], `${join(w.prompts, 'sub', 'x.db')}: cannot open the state database (Cannot open database because the directory does not exist: ${w.prompts} is a file, not a folder)`],
      [['plan', '--prompts', join(w.prompts, 'p.jsonl'), '--state', ':memory:', '--budget-rollouts', '8'], `${join(w.prompts, 'p.jsonl')}: cannot read (ENOTDIR)`],
    ] as const) {
      r = await cli([...args]);
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.stderr).toBe(`rollout-budget: ${said}\n`);
    }
    // An empty file: an empty plan and a new state file, exit 0, before; loop ran its steps on nothing.
    writeFileSync(w.prompts, '\n');
    for (const args of [['plan', '--budget-rollouts', '8'], ['loop', '--budget-rollouts', '8', '--steps', '2', '--endpoint', 'http://127.0.0.1:9', '--model', 'm']]) {
      r = await cli([...args, '--prompts', w.prompts, '--state', w.state]);
      expect(r.code, args[0]).toBe(2);
      expect(r.stderr).toBe(`rollout-budget: ${w.prompts}: no prompts: the file holds no line (one JSON object a line, {"id": ...})\n`);
      expect(existsSync(w.state)).toBe(false);
    }
  });

  it('no command: the help on stderr and exit 2, with no "(outputHelp)" after it', async () => {
    const r = await cli([]);
    expect(r.code).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(/^Usage: rollout-budget \[options\] \[command\]\n/);
    expect(r.stderr).toMatch(/  help \[command\] +display help for command\n$/);
    expect(r.stderr).not.toContain('outputHelp');
  });

  it('an unknown flag, a bad flag value, a missing budget, an unreadable file', async () => {
    const w = workdir();
    const runs = [
      [['plan', '--prompts', w.prompts, '--budget-rollouts', '8', '--bogus'], /unknown option '--bogus'/],
      [['plan', '--prompts', w.prompts, '--budget-rollouts', '8.5'], /^rollout-budget: --budget-rollouts must be an integer ≥ 0, got "8\.5"$/m],
      [['plan', '--prompts', w.prompts, '--state', w.state], /a budget is required/],
      [['plan', '--prompts', join(w.dir, 'missing.jsonl'), '--budget-rollouts', '8'], /missing\.jsonl: cannot read \(ENOENT\)/],
      [['plan', '--prompts', w.prompts, '--state', w.state, '--budget-rollouts', '8', '--policy', 'nope'], /^rollout-budget: --policy: unknown name "nope"; registered: bayes, thompson, mean\n$/],
      // The value is the flag's own name: shown as given (it read 'unknown name "--policy"').
      [['plan', '--prompts', w.prompts, '--state', w.state, '--budget-rollouts', '8', '--policy', 'policy'], /^rollout-budget: --policy: unknown name "policy"; registered: bayes, thompson, mean\n$/],
      [['plan', '--prompts', w.prompts, '--state', w.state, '--budget-rollouts', '5'], /3 prompts × 2 rollouts \(--min-n\) need 6 rollouts.*Raise --budget-rollouts, lower --min-n, or set --skip$/m],
    ] as const;
    for (const [argv, message] of runs) {
      const r = await cli([...argv]);
      expect(r.code, argv.join(' ')).toBe(2);
      expect(r.stderr).toMatch(message);
    }
    const out = join(w.dir, 'plan.json');
    await cli(['plan', '--prompts', w.prompts, '--state', w.state, '--budget-rollouts', '5', '--out', out]);
    expect(existsSync(out)).toBe(false);
  });

  it('answers a flag the library rejects before it reads the prompts (a typo in --policy waited 2.2 s for 10⁶ prompts to be read)', async () => {
    const w = workdir();
    // Line 2 is bad: an error naming it would mean the file was read before the flags were checked.
    const bad = join(w.dir, 'bad-line.jsonl');
    writeFileSync(bad, '{"id":"a"}\n{"id":5}\n');
    const runs = [
      [['--policy', 'bayz'], /^rollout-budget: --policy: unknown name "bayz"; registered: bayes, thompson, mean\n$/],
      [['--value', 'nope'], /^rollout-budget: --value: unknown name "nope"; registered: /],
      [['--min-n', '10', '--max-n', '5'], /^rollout-budget: --max-n must be an integer ≥ 10, got 5\n$/],
    ] as const;
    for (const [flags, message] of runs) {
      const r = await cli(['plan', '--prompts', bad, '--state', w.state, '--budget-rollouts', '8', ...flags]);
      expect(r.code, flags.join(' ')).toBe(2);
      expect(r.stderr).toMatch(message);
    }
    // The same file with good flags is refused for its line 2.
    const r = await cli(['plan', '--prompts', bad, '--state', w.state, '--budget-rollouts', '8']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/bad-line\.jsonl:2: "id"/);
    expect(existsSync(w.state)).toBe(false);
  });
});

describe('CLI plan / observe / inspect', () => {
  it('writes a plan to --out, keeps budgets, and observe is idempotent', async () => {
    const w = workdir();
    const out = join(w.dir, 'plan.json');
    const r = await cli(['plan', '--prompts', w.prompts, '--state', w.state, '--budget-rollouts', '24', '--out', out]);
    expect(r.code).toBe(0);
    const plan = JSON.parse(readFileSync(out, 'utf8')) as Plan;
    expect(plan.totals.rollouts).toBe(24);
    expect(plan.allocations.find((a) => a.prompt_id === 'b')!.max_tokens).toBe(4096);
    const results = join(w.dir, 'r.jsonl');
    writeFileSync(results, plan.allocations.map((a) => JSON.stringify({ prompt_id: a.prompt_id, rewards: Array.from({ length: a.n }, (_, j) => j % 2), tokens: Array.from({ length: a.n }, () => 50) })).join('\n'));
    const first = JSON.parse((await cli(['observe', '--results', results, '--state', w.state])).stdout);
    const second = JSON.parse((await cli(['observe', '--results', results, '--state', w.state])).stdout);
    expect(first.applied).toBe(24);
    expect(second).toMatchObject({ applied: 0, duplicates: 24 });
    const post = JSON.parse((await cli(['inspect', '--state', w.state, '--prompt', 'a'])).stdout);
    expect(post.rollouts).toBe(plan.allocations.find((a) => a.prompt_id === 'a')!.n);
    expect(post.step).toBe(1);
  });

  it('a rollout_id given to rollouts of two prompts is a warning naming both lines; the same line twice is a duplicate, quietly', async () => {
    // ids 0..3 in every group (a producer numbering each group's rollouts): observe kept the
    // first prompt's four and counted the other 396 as duplicates, exit 0, saying nothing.
    const w = workdir();
    const results = join(w.dir, 'ids.jsonl');
    const lines = Array.from({ length: 100 }, (_, p) => Array.from({ length: 4 }, (_, j) => JSON.stringify({ prompt_id: `q${p}`, step: 0, reward: j % 2, rollout_id: String(j) }))).flat();
    writeFileSync(results, `${lines.join('\n')}\n`);
    const state = join(w.dir, 'ids.db');
    const same = await cli(['observe', '--results', results, '--state', state]);
    expect(same.code, same.stderr).toBe(0);
    expect(JSON.parse(same.stdout)).toMatchObject({ applied: 4, duplicates: 396 });
    expect(same.stderr).toBe(`rollout-budget: warning: 396 rollouts repeat the rollout_id of a rollout of another prompt (the first: "0" of prompt "q1" (${results}:5), given to "q0" (${results}:1)): counted as its duplicates, not applied; a rollout id names one rollout, so make ids unique across prompts, e.g. "<step>/<prompt_id>#<j>"\n`);
    const twice = join(w.dir, 'twice.jsonl');
    writeFileSync(twice, `${lines[0]!.replace('"0"', '"a"')}\n${lines[1]!.replace('"1"', '"b"')}\n${lines[0]!.replace('"0"', '"a"')}\n`);
    const again = await cli(['observe', '--results', twice, '--state', join(w.dir, 'twice.db')]);
    expect(again.code, again.stderr).toBe(0);
    expect(JSON.parse(again.stdout)).toMatchObject({ applied: 2, duplicates: 1 });
    expect(again.stderr).toBe('');
  });

  it('round trip on the real fixture: plan → simulated outcomes → observe, 20 steps', async () => {
    const w = workdir();
    const run = new LoggedRun(parseVisits(readText(fixture('oneshot-rlvr-dsr-sub', 'visits.jsonl')), 'visits.jsonl'));
    let informativePlan = 0;
    let informativeLogged = 0;
    let totalRollouts = 0;
    for (const step of run.steps.slice(0, 20)) {
      const visits = run.at(step);
      writeFileSync(w.prompts, visits.map((v) => JSON.stringify({ id: v.prompt_id })).join('\n'));
      const budget = 8 * visits.length;
      const planRun = await cli(['plan', '--prompts', w.prompts, '--state', w.state, '--budget-rollouts', String(budget), '--seed', '7']);
      expect(planRun.code, planRun.stderr).toBe(0);
      const plan = JSON.parse(planRun.stdout) as Plan;
      expect(plan.step).toBe(step === run.steps[0] ? 0 : step);
      expect(plan.totals.rollouts).toBe(budget);
      const byId = new Map(visits.map((v) => [v.prompt_id, v]));
      const lines = plan.allocations.map((a) => {
        const v = byId.get(a.prompt_id)!;
        const rewards = drawOutcomes(v, run.pooledRate(v), a.n, seedrandom(`${step}/${a.prompt_id}`));
        const k = rewards.reduce((s, x) => s + x, 0);
        if (k > 0 && k < a.n) informativePlan++;
        return JSON.stringify({ prompt_id: a.prompt_id, step, rewards });
      });
      informativeLogged += visits.filter((v) => v.correct > 0 && v.correct < v.n).length;
      totalRollouts += plan.totals.rollouts;
      const obs = await cli(['observe', '--results', '-', '--state', w.state], lines.join('\n'));
      expect(obs.code, obs.stderr).toBe(0);
      expect(JSON.parse(obs.stdout).applied).toBe(budget);
    }
    const summary = JSON.parse((await cli(['inspect', '--state', w.state])).stdout);
    expect(summary.last_step).toBe(run.steps[19]);
    expect(summary.prompts).toBeGreaterThan(300);
    // Sanity, not a target: the plans keep at least 80% of the logged uniform groups' signal.
    expect(informativePlan).toBeGreaterThan(0.8 * informativeLogged);
    console.log(`20-step CLI round trip: ${totalRollouts} rollouts, informative groups ${informativePlan} (logged uniform-8: ${informativeLogged})`);
  });
});

// Issue 16, item 3: errors that doubled their subject. Commander wrapped every refused flag value
// as `option '--decay <rate>' argument '2' is invalid. expected a number in [0, 1], got "2"`.
describe('a refused flag value is named once, with its flag', () => {
  it.each([
    [['plan', '--prompts', 'p.jsonl', '--budget-rollouts', '4', '--decay', '2'], '--decay must be a number in [0, 1], got "2"'],
    [['plan', '--prompts', 'p.jsonl', '--budget-rollouts', '4', '--format', 'xml'], '--format must be one of json, jsonl, vllm-batch, sglang, got "xml"'],
    [['execute', '--plan', 'plan.json', '--prompts', 'p.jsonl', '--model', 'm', '--endpoint', 'ftp://x'], '--endpoint "ftp://x" must use http or https, got "ftp"'],
    [['execute', '--plan', 'plan.json', '--prompts', 'p.jsonl', '--model', 'm', '--endpoint', 'http://h', '--extra-body', '[1]'], '--extra-body must be a JSON object, got "[1]"'],
    // Fields execute sets itself: an n over the run's length has the server generate choices it throws away, one seed makes a split group's runs alike.
    [['execute', '--plan', 'plan.json', '--prompts', 'p.jsonl', '--model', 'm', '--endpoint', 'http://h', '--extra-body', '{"top_p":1,"n":1e9}'], '--extra-body sets "n", which execute sets itself (a request\'s n is its share of a group (the plan\'s n, split by --request-n)): leave it out'],
    [['loop', '--prompts', 'p.jsonl', '--model', 'm', '--endpoint', 'http://h', '--budget-rollouts', '8', '--extra-body', '{"seed":7}'], '--extra-body sets "seed", which execute sets itself (every rollout has its own seed, the group\'s seed + j, so that a group\'s rollouts differ and an aborted one resumes): leave it out'],
    [['execute', '--plan', 'plan.json', '--prompts', 'p.jsonl', '--model', 'm', '--endpoint', 'http://h', '--extra-body', '{"max_completion_tokens":64}'], '--extra-body sets "max_completion_tokens", which execute sets itself (from the plan\'s max_tokens (--max-tokens where it gives none)): leave it out'],
    [['replay', '--log', 'x.jsonl', '--seeds', '3..1'], '--seeds: the seed range "3..1" ends before it starts'],
    [['demo', '--steps', '0'], '--steps must be an integer ≥ 1, got "0"'],
  ])('%j', async (argv, message) => {
    const r = await cli([...argv]);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(`rollout-budget: ${message}\n`);
  });
});
