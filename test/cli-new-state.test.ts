import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createAllocator, runCli, type CliIo } from '../src/index.js';
import { cli } from './cli-helpers.js';
import { tempDir } from './temp.js';

/**
 * A command that fails leaves no state file that only it made (as `observe` already did), and
 * `inspect` creates none: a path with no state yet reads as an empty state.
 */
describe('a state file that is not there yet', () => {
  function workdir() {
    const dir = tempDir('rb-new-state-');
    const prompts = join(dir, 'prompts.jsonl');
    // "c" has a group: a plan records it in the state before it writes the plan file.
    writeFileSync(prompts, '{"id":"a","max_tokens":100}\n{"id":"b","max_tokens":100}\n{"id":"c","group":"g","max_tokens":100}\n');
    return { dir, prompts, state: join(dir, 'state.db') };
  }
  const stateFiles = (dir: string) => readdirSync(dir).filter((f) => f.startsWith('state.db'));

  it('plan: an infeasible budget, a bad option or an --out it cannot write leaves no state file; a plan that succeeds makes one', async () => {
    const w = workdir();
    const failures = [
      [['--budget-rollouts', '5'], /3 prompts × 2 rollouts \(--min-n\) need 6 rollouts/],
      [['--budget-rollouts', '24', '--min-n', '70', '--max-n', '64'], /--max-n must be an integer ≥ 70, got 64/],
      // Checked before the prompts are read or the state opened (cli/io.ts checkOutput).
      [['--budget-rollouts', '24', '--out', join(w.dir, 'missing', 'plan.json')], /missing\/plan\.json: cannot write \(ENOENT\)/],
    ] as const;
    for (const [flags, message] of failures) {
      const r = await cli(['plan', '--prompts', w.prompts, '--state', w.state, ...flags]);
      expect(r.code, flags.join(' ')).toBe(2);
      expect(r.stderr).toMatch(message);
      expect(stateFiles(w.dir), flags.join(' ')).toEqual([]);
    }
    const out = join(w.dir, 'plan.json');
    const ok = await cli(['plan', '--prompts', w.prompts, '--state', w.state, '--budget-rollouts', '24', '--out', out]);
    expect(ok.code).toBe(0);
    expect(existsSync(w.state)).toBe(true);
    expect(JSON.parse(readFileSync(out, 'utf8')).totals.rollouts).toBe(24);
  });

  it('plan: a failed plan keeps a state file that was there before, with its evidence', async () => {
    const w = workdir();
    expect((await cli(['observe', '--results', '-', '--state', w.state], '{"prompt_id":"a","reward":1}\n')).code).toBe(0);
    const before = (await cli(['inspect', '--state', w.state, '--prompt', 'a'])).stdout;
    const r = await cli(['plan', '--prompts', w.prompts, '--state', w.state, '--budget-rollouts', '5']);
    expect(r.code).toBe(2);
    expect(existsSync(w.state)).toBe(true);
    expect((await cli(['inspect', '--state', w.state, '--prompt', 'a'])).stdout).toBe(before);
    expect(JSON.parse(before).rollouts).toBe(1);
  });

  it('plan: a plan whose output fails after it recorded a group removes the state it made, unless another writer observed into it meanwhile', async () => {
    const w = workdir();
    let stderr = '';
    let otherWriter = false;
    // The plan is written to stdout after the state recorded c's group; then the write fails.
    // With otherWriter, another connection (as another process would) observes into the new
    // state first.
    const io: CliIo = {
      stdout: () => {
        if (otherWriter) {
          const other = createAllocator({ state: w.state });
          try {
            other.observe([{ prompt_id: 'z', reward: 1 }]);
          } finally {
            other.close();
          }
        }
        throw new Error('stdout closed');
      },
      stderr: (t) => void (stderr += t),
      readStdin: async () => '',
      stderrIsTty: false,
    };
    const argv = ['plan', '--prompts', w.prompts, '--state', w.state, '--budget-rollouts', '24', '--out', '-'];
    expect(await runCli(argv, io)).not.toBe(0);
    expect(stderr).toMatch(/stdout closed/);
    expect(stateFiles(w.dir)).toEqual([]);
    otherWriter = true;
    expect(await runCli(argv, io)).not.toBe(0);
    expect(existsSync(w.state)).toBe(true);
    expect(JSON.parse((await cli(['inspect', '--state', w.state, '--prompt', 'z'])).stdout).rollouts).toBe(1);
  });

  it('inspect: an empty state\'s summary and posterior, a one-line note, and no file made', async () => {
    const w = workdir();
    const summary = await cli(['inspect', '--state', w.state]);
    expect(summary.code).toBe(0);
    expect(stateFiles(w.dir)).toEqual([]);
    expect(summary.stderr).toBe(`rollout-budget: note: no state file at ${w.state} yet: this is an empty state's summary (no file was created)\n`);
    const parsed = JSON.parse(summary.stdout);
    expect(parsed).toMatchObject({ prompts: 0, last_step: null, prior_for_new_prompts: { alpha: 1, beta: 1, p_mean: 0.5 } });
    const prompt = await cli(['inspect', '--state', w.state, '--prompt', 'a']);
    expect(prompt.code).toBe(0);
    expect(prompt.stderr).toMatch(/empty state's posterior \(no file was created\)\n$/);
    expect(stateFiles(w.dir)).toEqual([]);
    // The same as on a state file made empty by hand (observe of aborted rollouts only: applies nothing).
    const made = join(w.dir, 'made.db');
    const aborted = await cli(['observe', '--results', '-', '--state', made], '{"prompt_id":"z","reward":0,"finish_reason":"abort"}\n');
    expect(JSON.parse(aborted.stdout)).toMatchObject({ applied: 0, aborted: 1 });
    const onFile = await cli(['inspect', '--state', made]);
    expect(onFile.stderr).toBe('');
    expect(onFile.stdout).toBe(summary.stdout);
    expect((await cli(['inspect', '--state', made, '--prompt', 'a'])).stdout).toBe(prompt.stdout);
  });

  it('an empty (0-byte) file: inspect reads an empty state and writes nothing into it; backup refuses it', async () => {
    // SQLite takes a 0-byte file for a new database: inspect wrote a state's tables into it
    // (114,688 bytes), and a checkpoint's copy cut at its start was then backed up over the
    // live state by the Python integration (python/rollout_budget/checkpoint.py).
    const w = workdir();
    const empty = join(w.dir, 'cut.db');
    writeFileSync(empty, '');
    const summary = await cli(['inspect', '--state', empty]);
    expect(summary.code).toBe(0);
    expect(summary.stderr).toBe(`rollout-budget: note: the state file ${empty} is empty (0 bytes): this is an empty state's summary (nothing was written to it)\n`);
    expect(JSON.parse(summary.stdout)).toMatchObject({ prompts: 0, last_step: null });
    expect(readFileSync(empty).length).toBe(0);
    expect(readdirSync(w.dir).filter((f) => f.startsWith('cut.db'))).toEqual(['cut.db']);
    const out = join(w.dir, 'state.db');
    const backup = await cli(['backup', '--state', empty, '--out', out]);
    expect(backup.code).toBe(2);
    expect(backup.stderr).toContain(`--state ${empty}: the file is empty (0 bytes), not a state: nothing to copy`);
    expect(existsSync(out)).toBe(false);
  });

  it('a --state that is a URL but not postgres:// is refused, not taken for a file name (inspect read the service\'s https:// URL as an empty state, exit 0)', async () => {
    const w = workdir();
    const service = /an http\(s\):\/\/ URL names the service, for its clients \(the Python HttpClient, a trainer's ROLLOUT_BUDGET_URL\)/;
    const cases = [
      [['inspect', '--state', 'https://rb.example:8443/rollout-budget'], /--state "https:\/\/rb\.example:8443\/rollout-budget" is a URL, and a state is a SQLite file or a postgres:\/\/ URL/, service],
      [['plan', '--prompts', w.prompts, '--budget-rollouts', '24', '--state', 'http://127.0.0.1:8080'], /--state "http:\/\/127\.0\.0\.1:8080" is a URL/, service],
      [['observe', '--results', '-', '--state', 's3://bucket/state.db'], /--state "s3:\/\/bucket\/state\.db" is a URL, and a state is a SQLite file or a postgres:\/\/ URL$/m, undefined],
      [['backup', '--state', 'mysql://u:pw@h/db', '--out', join(w.dir, 'copy.db')], /--state "mysql:\/\/u:\*\*\*@h\/db" is a URL/, undefined],
    ] as const;
    for (const [args, says, alsoSays] of cases) {
      const r = await cli([...args], '{"prompt_id":"a","reward":1}\n');
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.stdout).toBe('');
      expect(r.stderr).toMatch(says);
      if (alsoSays !== undefined) expect(r.stderr).toMatch(alsoSays);
      expect(r.stderr).not.toMatch(/pw@/);
    }
    expect(readdirSync(w.dir).sort()).toEqual(['prompts.jsonl']);
    // The library refuses it too (it took it for a file path: "the directory does not exist").
    expect(() => createAllocator({ state: 'https://rb.example/rollout-budget' })).toThrow(/"https:\/\/rb\.example\/rollout-budget" is a URL, and a state is a SQLite file/);
    const code = (() => { try { createAllocator({ state: 'https://rb.example/x' }); } catch (error) { return (error as { code?: string }).code; } return undefined; })();
    expect(code).toBe('BAD_OPTION');
  });
});
