import { spawn, spawnSync } from 'node:child_process';
import { lstatSync, readFileSync, readdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { cli } from './cli-helpers.js';
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

  // As root, a writer that renames would replace the machine's /dev/null: run where it cannot.
  it.runIf(process.getuid?.() !== 0)('/dev/null takes the plan (a user other than root could not make the temp file in /dev)', async () => {
    const w = workdir();
    const run = await plan(w.prompts, '/dev/null');
    expect(run.code, run.stderr).toBe(0);
    expect(lstatSync('/dev/null').isCharacterDevice()).toBe(true);
  });
});
