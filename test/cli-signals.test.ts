import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { stopSignals } from '../src/cli/signals.js';
import { CLI } from './service-helpers.js';
import { tempDir } from './temp.js';

/**
 * The one stop-signal helper of `serve`, `sim-server`, `execute` and `loop` (src/cli/signals.ts).
 * Signals are emitted to this process's listeners only (process.emit): no real signal is sent.
 */
describe('stopSignals', () => {
  it('the first SIGINT or SIGTERM stops, and takes both handlers away, so a second one has Node\'s default (quit at once)', async () => {
    for (const sig of ['SIGINT', 'SIGTERM'] as const) {
      const before = { SIGINT: process.listenerCount('SIGINT'), SIGTERM: process.listenerCount('SIGTERM') };
      const seen: string[] = [];
      const stop = stopSignals((name) => seen.push(name));
      expect(process.listenerCount('SIGINT')).toBe(before.SIGINT + 1);
      expect(process.listenerCount('SIGTERM')).toBe(before.SIGTERM + 1);
      expect(stop.received()).toBeUndefined();
      expect(stop.signal.aborted).toBe(false);
      process.emit(sig);
      expect(await stop.stopped).toBe(sig);
      expect(stop.received()).toBe(sig);
      expect(stop.signal.aborted).toBe(true);
      expect(seen).toEqual([sig]);
      expect(process.listenerCount('SIGINT')).toBe(before.SIGINT);
      expect(process.listenerCount('SIGTERM')).toBe(before.SIGTERM);
    }
  });

  it('dispose() without a signal takes both handlers away', () => {
    const before = process.listenerCount('SIGINT') + process.listenerCount('SIGTERM');
    const stop = stopSignals();
    stop.dispose();
    expect(process.listenerCount('SIGINT') + process.listenerCount('SIGTERM')).toBe(before);
    expect(stop.received()).toBeUndefined();
  });
});

describe('Ctrl-C while plan writes its file', () => {
  it('ends the process only once the temp file is renamed into place: no <out>.tmp-<pid> left, the plan whole', async () => {
    const dir = tempDir();
    const prompts = join(dir, 'prompts.jsonl');
    const size = 200_000;
    writeFileSync(prompts, Array.from({ length: size }, (_, i) => `{"id":"p${i}","max_tokens":1024}\n`).join(''));
    const out = join(dir, 'plan.json');
    const child = spawn(process.execPath, [CLI, 'plan', '--prompts', prompts, '--state', ':memory:', '--budget-rollouts', String(8 * size), '--out', out], { stdio: 'ignore' });
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    const tmp = `${out}.tmp-${child.pid}`;
    // The signal as soon as the temp file is there: the write of 200,000 rows takes ~100 ms.
    let sent = false;
    const poll = setInterval(() => {
      if (!sent && existsSync(tmp)) {
        sent = true;
        child.kill('SIGINT');
      }
    }, 1);
    const code = await exited;
    clearInterval(poll);
    expect(sent, 'the temp file never showed').toBe(true);
    // Before: killed mid-write (exit by SIGINT), its temp file left, up to the plan's size.
    expect(readdirSync(dir).sort()).toEqual(['plan.json', 'prompts.jsonl']);
    expect(code).toBe(0);
    expect(JSON.parse(readFileSync(out, 'utf8')).totals.prompts).toBe(size);
  }, 60_000);
});

describe('Ctrl-C while observe copies its results from a pipe', () => {
  it('removes the copy in the temp folder, makes no state, and ends by the signal, even right after the folder appears', async () => {
    // Before: a SIGINT between the folder's making and the handler's start met Node's default
    // action and left the folder (25 of 100 such signals); 12 rounds catch that 97 times in 100.
    for (let round = 0; round < 12; round++) {
      const dir = tempDir();
      const tmp = join(dir, 'tmp');
      mkdirSync(tmp);
      const state = join(dir, 'state.db');
      const child = spawn(process.execPath, [CLI, 'observe', '--results', '-', '--state', state], { stdio: ['pipe', 'ignore', 'ignore'], env: { ...process.env, TMPDIR: tmp } });
      const exited = new Promise<NodeJS.Signals | null>((resolve) => child.once('exit', (_code, signal) => resolve(signal)));
      child.stdin.write('{"prompt_id":"a","reward":1}\n'); // and the pipe stays open: the copy goes on
      const deadline = Date.now() + 20_000;
      while (readdirSync(tmp).length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 1));
      expect(readdirSync(tmp)).toEqual([expect.stringMatching(/^rollout-budget-stdin-/)]);
      child.kill('SIGINT');
      expect(await exited).toBe('SIGINT');
      // Before: the copy's folder stayed in $TMPDIR at every Ctrl-C.
      expect(readdirSync(tmp), `round ${round}`).toEqual([]);
      expect(existsSync(state)).toBe(false);
      child.stdin.destroy();
    }
  }, 120_000);
});

/** A pid no process has now (one that ran and ended), and a process that runs (kill it when done). */
async function deadAndAlive(): Promise<{ dead: number; alive: ReturnType<typeof spawn> }> {
  const ended = spawn(process.execPath, ['-e', '0']);
  await new Promise((resolve) => ended.on('exit', resolve));
  return { dead: ended.pid!, alive: spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60000)']) };
}

describe('temp files a killed writer left', () => {
  it('are removed by the next plan or backup of the same file, when their process is gone; a running one keeps its own', async () => {
    const { cli } = await import('./cli-helpers.js');
    const dir = tempDir('rb-stale-');
    const prompts = join(dir, 'p.jsonl');
    writeFileSync(prompts, '{"id":"a"}\n{"id":"b"}\n');
    const out = join(dir, 'plan.json');
    const copy = join(dir, 'copy.db');
    const { dead, alive } = await deadAndAlive();
    try {
      const hourAgo = new Date(Date.now() - 3_600_000);
      for (const name of [`plan.json.tmp-${dead}`, `plan.json.tmp-${alive.pid}`, `copy.db.tmp-${dead}`, `copy.db.tmp-${dead}-journal`]) {
        writeFileSync(join(dir, name), 'left by a kill -9');
        utimesSync(join(dir, name), hourAgo, hourAgo);
      }
      // Kept: one written a moment ago (a writer on another host sharing the folder), and a folder of that name.
      writeFileSync(join(dir, 'plan.json.tmp-999999'), 'another host\'s writer');
      mkdirSync(join(dir, 'copy.db.tmp-999998'));
      expect((await cli(['plan', '--prompts', prompts, '--state', join(dir, 's.db'), '--budget-rollouts', '4', '--out', out])).code).toBe(0);
      expect((await cli(['backup', '--state', join(dir, 's.db'), '--out', copy])).code).toBe(0);
      expect(readdirSync(dir).filter((n) => n.includes('.tmp-')).sort()).toEqual(['copy.db.tmp-999998', `plan.json.tmp-${alive.pid}`, 'plan.json.tmp-999999'].sort());
    } finally {
      alive.kill();
    }
  });
});

describe('copies of stdin a killed observe left in the temp folder', () => {
  it('are removed by the next copy, when their process is gone and they are 10 minutes old; a running one\'s and a fresh one stay', async () => {
    // Found by a hostile review: each kill -9 during observe --results - left its whole copy (46 MB at 600,000 rollouts) for good.
    const { spawnSync } = await import('node:child_process');
    const dir = tempDir('rb-spools-');
    const { dead, alive } = await deadAndAlive();
    try {
      const hourAgo = new Date(Date.now() - 3_600_000);
      const made = (name: string, old: boolean) => {
        mkdirSync(join(dir, name));
        writeFileSync(join(dir, name, 'input.jsonl'), '{"prompt_id":"a","reward":1}\n');
        if (old) {
          utimesSync(join(dir, name, 'input.jsonl'), hourAgo, hourAgo);
          utimesSync(join(dir, name), hourAgo, hourAgo);
        }
      };
      made(`rollout-budget-stdin-${dead}-aB3xYz`, true);
      made(`rollout-budget-stdin-${alive.pid}-cD4wVu`, true);
      made(`rollout-budget-stdin-${dead}-eF5tSr`, false);
      made('rollout-budget-stdin-old-style', true); // a name without a pid (made before): not ours to judge
      const r = spawnSync(process.execPath, [CLI, 'observe', '--results', '-', '--state', ':memory:'], { input: '{"prompt_id":"a","reward":1}\n', encoding: 'utf8', env: { ...process.env, TMPDIR: dir } });
      expect(r.status, r.stderr).toBe(0);
      expect(readdirSync(dir).sort()).toEqual([`rollout-budget-stdin-${alive.pid}-cD4wVu`, `rollout-budget-stdin-${dead}-eF5tSr`, 'rollout-budget-stdin-old-style'].sort());
    } finally {
      alive.kill();
    }
  });
});
