import { spawn, spawnSync } from 'node:child_process';
import { existsSync, lstatSync, readFileSync, readdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { cli } from './cli-helpers.js';
import { CLI } from './service-helpers.js';
import { tempDir } from './temp.js';

/**
 * `--out` that is not a regular file. The writer replaced its target by a rename, so `--out
 * /dev/null` run as root put a regular file where /dev/null was (every later `> /dev/null` on
 * the machine then wrote into it), and as another user failed (no temp file can be made in
 * /dev); a FIFO or a shell's `>(...)` (/dev/fd/N) was replaced or refused the same way, and a
 * symlink was replaced by a file.
 */
describe('--out that is a pipe, a device or a symlink', () => {
  function workdir() {
    const dir = tempDir('rb-out-');
    const prompts = join(dir, 'prompts.jsonl');
    writeFileSync(prompts, '{"id":"a","max_tokens":100}\n{"id":"b","max_tokens":100}\n');
    return { dir, prompts };
  }
  const plan = (prompts: string, out: string) => cli(['plan', '--prompts', prompts, '--state', ':memory:', '--budget-rollouts', '8', '--out', out]);

  it('a FIFO is written in place: its reader gets the plan, and it is still a FIFO', async () => {
    const w = workdir();
    const fifo = join(w.dir, 'plan.fifo');
    expect(spawnSync('mkfifo', [fifo]).status).toBe(0);
    const reader = spawn('cat', [fifo]);
    let read = '';
    reader.stdout.on('data', (b: Buffer) => (read += b.toString('utf8')));
    const done = new Promise<number | null>((resolve) => reader.on('close', resolve));
    const run = await plan(w.prompts, fifo);
    // A writer that renamed over the FIFO never opened it: its reader would wait for ever.
    const exited = await Promise.race([done, new Promise<'waiting'>((resolve) => setTimeout(() => resolve('waiting'), 3000))]);
    if (exited === 'waiting') reader.kill();
    expect(run.code, run.stderr).toBe(0);
    expect(exited).toBe(0);
    expect(lstatSync(fifo).isFIFO()).toBe(true);
    const parsed = JSON.parse(read) as { totals: { rollouts: number }; allocations: { prompt_id: string; n: number }[] };
    expect(parsed.totals.rollouts).toBe(8);
    expect(parsed.allocations.map((a) => a.prompt_id)).toEqual(['a', 'b']);
    expect(readdirSync(w.dir).sort()).toEqual(['plan.fifo', 'prompts.jsonl']); // no temp file left
  });

  it('a symlink stays a symlink: the file it points to gets the plan, atomically', async () => {
    const w = workdir();
    const target = join(w.dir, 'step-12.json');
    const link = join(w.dir, 'latest.json');
    writeFileSync(target, 'the last step\'s plan');
    symlinkSync('step-12.json', link);
    const run = await plan(w.prompts, link);
    expect(run.code, run.stderr).toBe(0);
    expect(lstatSync(link).isSymbolicLink()).toBe(true);
    expect((JSON.parse(readFileSync(target, 'utf8')) as { totals: { rollouts: number } }).totals.rollouts).toBe(8);
    expect(readdirSync(w.dir).sort()).toEqual(['latest.json', 'prompts.jsonl', 'step-12.json']);
  });

  it('a symlink to a file not there yet stays a symlink: the file is made where it leads, as the shell\'s > does', async () => {
    // Found by a hostile review: the rename put a regular file where the link was.
    const w = workdir();
    const link = join(w.dir, 'latest.json');
    symlinkSync('step-13.json', link);
    const run = await plan(w.prompts, link);
    expect(run.code, run.stderr).toBe(0);
    expect(lstatSync(link).isSymbolicLink()).toBe(true);
    expect((JSON.parse(readFileSync(join(w.dir, 'step-13.json'), 'utf8')) as { totals: { rollouts: number } }).totals.rollouts).toBe(8);
    expect(readdirSync(w.dir).sort()).toEqual(['latest.json', 'prompts.jsonl', 'step-13.json']);
    // A link whose target climbs `..` from a folder reached through another link: from its real
    // folder, as the kernel follows it (the first fix resolved `..` by text: the plan went elsewhere).
    const { mkdirSync } = await import('node:fs');
    mkdirSync(join(w.dir, 'real', 'runs', 'run1'), { recursive: true });
    mkdirSync(join(w.dir, 'real', 'plans'));
    mkdirSync(join(w.dir, 'work', 'plans'), { recursive: true });
    symlinkSync(join(w.dir, 'real', 'runs', 'run1'), join(w.dir, 'work', 'run1'));
    symlinkSync('../../plans/next.json', join(w.dir, 'real', 'runs', 'run1', 'plan.json'));
    const through = await plan(w.prompts, join(w.dir, 'work', 'run1', 'plan.json'));
    expect(through.code, through.stderr).toBe(0);
    expect(readdirSync(join(w.dir, 'real', 'plans'))).toEqual(['next.json']);
    expect(readdirSync(join(w.dir, 'work', 'plans'))).toEqual([]);
  });

  // As root, a writer that renames would replace the machine's /dev/null: run where it cannot.
  it.runIf(process.getuid?.() !== 0)('/dev/null takes the plan (a user other than root could not make the temp file in /dev)', async () => {
    const w = workdir();
    const run = await plan(w.prompts, '/dev/null');
    expect(run.code, run.stderr).toBe(0);
    expect(lstatSync('/dev/null').isCharacterDevice()).toBe(true);
  });
});

/** Runs a bash script (the real process, its pipes and process substitutions as a shell makes them). */
function bash(script: string): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync('bash', ['-c', script], { encoding: 'utf8', timeout: 60_000 });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe('pipes: a reader that closes early, and an input that can be read once', () => {
  it('a plan piped into `head` ends quietly: exit 0, no stack trace (Node crashed on EPIPE)', () => {
    const dir = tempDir('rb-pipe-');
    const prompts = join(dir, 'prompts.jsonl');
    // 6,000 prompts: a plan of about 1.4 MB, more than a pipe holds, so the writer meets EPIPE.
    writeFileSync(prompts, Array.from({ length: 6000 }, (_, i) => `{"id":"q${i}","max_tokens":100}\n`).join(''));
    const r = bash(`set -o pipefail; node '${CLI}' plan --prompts '${prompts}' --state :memory: --budget-rollouts 48000 | head -c 100`);
    // No stack trace: stderr holds the plan's warnings only (the lengths a new state assumes).
    expect(r.stderr.split('\n').filter((l) => l !== '' && !l.startsWith('rollout-budget: warning: '))).toEqual([]);
    expect(r.stderr).not.toMatch(/EPIPE/);
    expect(r.status).toBe(0);
    expect(r.stdout).toBe(`{\n  "version": 1,\n  "step": 0,\n  "seed": 0,\n  "policy": "bayes",\n  "value": "balanced",\n  "budget": {\n    "`.slice(0, 100));
  });

  it('serve --stdio whose reader goes away stops cleanly: exit 0, the store closed, no stack trace (it crashed on EPIPE)', () => {
    const dir = tempDir('rb-pipe-');
    const state = join(dir, 'state.db');
    const err = join(dir, 'stderr.txt');
    // 3,000 answers fill the pipe after `head` has gone; the input stays open a second longer.
    const r = bash(`(for i in $(seq 1 3000); do echo '{"id":1,"path":"/healthz"}'; done; sleep 1) | node '${CLI}' serve --stdio --state '${state}' 2>'${err}' | head -c 10 >/dev/null; echo "\${PIPESTATUS[1]}"`);
    expect(r.stdout.trim()).toBe('0');
    const stderr = readFileSync(err, 'utf8');
    expect(stderr).toContain('rollout-budget serve: stopping (output closed)\n');
    expect(stderr).toContain('rollout-budget serve: store closed\n');
    expect(stderr).not.toContain('EPIPE');
  });

  it('observe and replay read a process substitution <(...) whole: observe reads its input twice (the digest, then the chunks) and applied nothing', () => {
    const dir = tempDir('rb-pipe-');
    const results = join(dir, 'results.jsonl');
    writeFileSync(results, '{"prompt_id":"a","reward":1,"step":0}\n{"prompt_id":"a","reward":0,"step":0}\n{"prompt_id":"b","reward":1,"step":1}\n');
    const state = join(dir, 'state.db');
    const first = bash(`node '${CLI}' observe --results <(cat '${results}') --state '${state}'`);
    expect(first.stderr).toBe('');
    expect(JSON.parse(first.stdout)).toEqual({ applied: 3, duplicates: 0, aborted: 0, prompts: 2, last_step: 1 });
    // The same bytes again: the same batch digest, so nothing is applied twice.
    expect(JSON.parse(bash(`node '${CLI}' observe --results <(cat '${results}') --state '${state}'`).stdout)).toMatchObject({ applied: 0, duplicates: 3 });
    // A bad line is named by the path the user gave.
    const bad = bash(`node '${CLI}' observe --results <(printf '{"prompt_id":"a","reward":2}\\n') --state '${state}'`);
    expect(bad.status).toBe(2);
    expect(bad.stderr).toMatch(/^rollout-budget: \/dev\/fd\/\d+:1: "reward" must be a number in \[0, 1\], got 2\n$/);
    // Steps out of order: replay reads such a log a second time, packed.
    const log = join(dir, 'log.jsonl');
    writeFileSync(log, '{"prompt_id":"a","step":1,"rewards":[1,0]}\n{"prompt_id":"b","step":0,"rewards":[1,1]}\n');
    const replay = bash(`node '${CLI}' replay --log <(cat '${log}') --policies uniform --quiet`);
    expect(replay.stderr).toBe('');
    expect(replay.status).toBe(0);
    expect(replay.stdout).toMatch(/^uniform\s/m);
    expect(readdirSync(tmpdir()).filter((n) => n.startsWith('rollout-budget-input-'))).toEqual([]); // the copies are gone
  });
});

/**
 * An --out that is one of the command's own inputs. `plan --out state.db` wrote the plan over
 * the state (exit 0; every later command: "file is not a database"), and `grade`'s and
 * `execute`'s --out replaced their plan or batch output the same way. `--state ''` (an unset
 * variable) opened SQLite's temporary database, so everything observed was lost at exit.
 */
describe('an --out that is an input, and an empty --state', () => {
  const fixture = (...p: string[]) => join(import.meta.dirname, '..', 'fixtures', 'qwen-math100-k8', ...p);

  it('plan, grade and execute refuse an --out that is one of their inputs (also through a symlink), and leave it as it was', async () => {
    const dir = tempDir('rb-out-input-');
    const state = join(dir, 'state.db');
    const prompts = join(dir, 'prompts.jsonl');
    writeFileSync(prompts, '{"id":"a","max_tokens":100}\n{"id":"b","max_tokens":100}\n');
    writeFileSync(join(dir, 'results.jsonl'), '{"prompt_id":"a","step":0,"rewards":[1,0]}\n');
    expect((await cli(['observe', '--results', join(dir, 'results.jsonl'), '--state', state])).code).toBe(0);
    symlinkSync(state, join(dir, 'link.db'));
    const planFile = join(dir, 'plan.json');
    writeFileSync(planFile, readFileSync(fixture('plan.json')));
    const batch = join(dir, 'batch-output.jsonl');
    writeFileSync(batch, readFileSync(fixture('batch-output.jsonl')));
    const before = [state, prompts, planFile, batch].map((f) => readFileSync(f));
    const runs: [string[], string][] = [
      [['plan', '--prompts', prompts, '--state', state, '--budget-rollouts', '8', '--out', state], `--out ${state} is the --state file ${state}`],
      [['plan', '--prompts', prompts, '--state', state, '--budget-rollouts', '8', '--out', join(dir, 'link.db')], `--out ${join(dir, 'link.db')} is the --state file ${state}`],
      [['plan', '--prompts', prompts, '--state', state, '--budget-rollouts', '8', '--out', prompts], `--out ${prompts} is the --prompts file ${prompts}`],
      [['grade', '--batch-output', batch, '--plan', planFile, '--prompts', fixture('prompts.jsonl'), '--out', batch], `--out ${batch} is the --batch-output file ${batch}`],
      [['grade', '--batch-output', batch, '--plan', planFile, '--prompts', fixture('prompts.jsonl'), '--out', planFile], `--out ${planFile} is the --plan file ${planFile}`],
      [['execute', '--plan', planFile, '--prompts', fixture('prompts.jsonl'), '--endpoint', 'http://127.0.0.1:9/v1', '--model', 'm', '--state', join(dir, 'partials.db'), '--out', planFile], `--out ${planFile} is the --plan file ${planFile}`],
    ];
    for (const [argv, message] of runs) {
      const r = await cli(argv);
      expect(r.code, argv.join(' ')).toBe(2);
      expect(r.stderr, argv.join(' ')).toBe(`rollout-budget: ${message}: writing it would replace that input; give another path (nothing was written)\n`);
    }
    [state, prompts, planFile, batch].forEach((f, i) => expect(readFileSync(f).equals(before[i]!), f).toBe(true));
    expect(lstatSync(join(dir, 'link.db')).isSymbolicLink()).toBe(true);
    expect(readdirSync(dir).sort()).toEqual(['batch-output.jsonl', 'link.db', 'plan.json', 'prompts.jsonl', 'results.jsonl', 'state.db']);
    // A state that is not there yet, made by this plan: the plan was renamed over it, its -wal and -shm left beside.
    const fresh = join(dir, 'new.db');
    const made = await cli(['plan', '--prompts', prompts, '--state', fresh, '--budget-rollouts', '8', '--out', join(dir, '.', 'new.db')]);
    expect(made.code).toBe(2);
    expect(made.stderr).toBe(`rollout-budget: --out ${join(dir, '.', 'new.db')} is the --state file ${fresh}: writing it would replace that input; give another path (nothing was written)\n`);
    expect(existsSync(fresh)).toBe(false);
    // A symlink made before the state, as --out or as --state: the writer follows it to the new state's
    // place, so the plan was written over the state the plan had just made (and its -wal then over the plan).
    symlinkSync('new.db', join(dir, 'new-link.db'));
    for (const [stateArg, outArg] of [[fresh, join(dir, 'new-link.db')], [join(dir, 'new-link.db'), fresh]] as const) {
      const linked = await cli(['plan', '--prompts', prompts, '--state', stateArg, '--budget-rollouts', '8', '--out', outArg]);
      expect(linked.code, `${stateArg} ${outArg}`).toBe(2);
      expect(linked.stderr).toBe(`rollout-budget: --out ${outArg} is the --state file ${stateArg}: writing it would replace that input; give another path (nothing was written)\n`);
      expect(existsSync(fresh)).toBe(false);
    }
    const linkedResults = await cli(['execute', '--plan', planFile, '--prompts', fixture('prompts.jsonl'), '--endpoint', 'http://127.0.0.1:9/v1', '--model', 'm', '--state', fresh, '--out', join(dir, 'new-link.db')]);
    expect(linkedResults.code).toBe(2);
    expect(linkedResults.stderr).toBe(`rollout-budget: --out ${join(dir, 'new-link.db')} is the --state file ${fresh}: writing it would replace that input; give another path (nothing was written)\n`);
    expect(existsSync(fresh)).toBe(false);
    expect(lstatSync(join(dir, 'new-link.db')).isSymbolicLink()).toBe(true);
    // A symlink into a folder that is not there: named before any work, as the plain path is (it was
    // refused with a bare ENOENT after the plan was made).
    symlinkSync(join('no-such-folder', 'plan.json'), join(dir, 'to-nowhere.json'));
    const nowhere = await cli(['plan', '--prompts', prompts, '--state', state, '--budget-rollouts', '8', '--out', join(dir, 'to-nowhere.json')]);
    expect(nowhere.code).toBe(2);
    expect(nowhere.stderr).toBe(`rollout-budget: ${join(dir, 'to-nowhere.json')}: cannot write (ENOENT): there is no folder ${join(dir, 'no-such-folder')}\n`);
    // Another file is written as before.
    const other = await cli(['plan', '--prompts', prompts, '--state', state, '--budget-rollouts', '8', '--out', join(dir, 'other.json')]);
    expect(other.code, other.stderr).toBe(0);
    expect((JSON.parse(readFileSync(join(dir, 'other.json'), 'utf8')) as { totals: { rollouts: number } }).totals.rollouts).toBe(8);
  });

  it('an empty --state is refused by every command that takes one, before any work, and so is inspect\'s empty --prompt', async () => {
    const dir = tempDir('rb-empty-state-');
    writeFileSync(join(dir, 'results.jsonl'), '{"prompt_id":"a","step":0,"rewards":[1,0]}\n');
    writeFileSync(join(dir, 'prompts.jsonl'), '{"id":"a"}\n');
    const message = 'rollout-budget: --state "" is an empty path (an unset variable?): give a state file, :memory: or a postgres:// URL\n';
    for (const argv of [
      ['observe', '--results', join(dir, 'results.jsonl'), '--state', ''],
      ['plan', '--prompts', join(dir, 'prompts.jsonl'), '--state', '', '--budget-rollouts', '8'],
      ['inspect', '--state', ' '],
      ['serve', '--state', '', '--port', '0'],
    ]) {
      const r = await cli(argv);
      expect(r.code, argv[0]).toBe(2);
      expect(r.stderr, argv[0]).toBe(argv[2] === ' ' ? message.replace('""', '" "') : message);
    }
    // An empty prompt id, which no file can give: inspect answered for prompt "" with exit 0.
    const empty = await cli(['inspect', '--state', ':memory:', '--prompt', '']);
    expect([empty.code, empty.stderr]).toEqual([2, 'rollout-budget: --prompt must be a prompt id, got ""\n']);
  });
});
