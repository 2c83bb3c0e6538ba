// A TMPDIR that names no folder, or a temp disk that fills: observe's copy of stdin and replay's
// scratch file were internal errors with a stack trace (exit 1). They name the temp folder, the
// variable that named it and what to do now (src/io/temp-folder.ts), exit 2, and leave nothing.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CLI, ROOT } from './service-helpers.js';
import { tempDir } from './temp.js';

const run = (args: readonly string[], env: NodeJS.ProcessEnv, input?: string) =>
  spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', env: { ...process.env, ...env }, ...(input === undefined ? {} : { input }) });

/** Rollout results, about `bytes` of them. */
function results(bytes: number): string {
  let text = '';
  for (let i = 0; text.length < bytes; i++) text += `${JSON.stringify({ prompt_id: `p${i % 500}`, reward: i % 2, rollout_id: `r${i}` })}\n`;
  return text;
}

describe('the temp folder (TMPDIR)', () => {
  it('observe --results - with a TMPDIR that is not there: exit 2 naming it, no state made', () => {
    const dir = tempDir('rb-tmpdir-');
    const missing = join(dir, 'not-made');
    const r = run(['observe', '--results', '-', '--state', join(dir, 'state.db')], { TMPDIR: missing }, results(1000));
    expect(r.status, r.stderr).toBe(2);
    expect(r.stderr).toBe(`rollout-budget: cannot make a temporary folder for the copy of stdin in ${missing} ($TMPDIR): ENOENT; set TMPDIR to a folder this user can write\n`);
    expect(readdirSync(dir)).toEqual([]);
  });

  it('replay with a TMPDIR that is not there: exit 2 naming it, no report written', () => {
    const dir = tempDir('rb-tmpdir-replay-');
    const missing = join(dir, 'not-made');
    const r = run(['replay', '--log', join(ROOT, 'fixtures', 'oneshot-rlvr-dsr-sub', 'visits.jsonl'), '--policies', 'uniform', '--quiet', '--out', join(dir, 'report')], { TMPDIR: missing });
    expect(r.status, r.stderr).toBe(2);
    expect(r.stderr).toBe(`rollout-budget: cannot make a temporary folder for the replay's scratch file in ${missing} ($TMPDIR): ENOENT; set TMPDIR to a folder this user can write\n`);
    expect(readdirSync(dir)).toEqual([]);
  });

  // A real full disk: a 64 kB tmpfs, where this test may mount one (root on Linux).
  const canMount = process.platform === 'linux' && process.getuid?.() === 0 && readFileSync('/proc/filesystems', 'utf8').includes('tmpfs');
  it.skipIf(!canMount)('observe --results - whose copy fills the temp disk: exit 2 saying ENOSPC and what to do, the copy removed, no state made (root: mounts a tmpfs)', (ctx) => {
    const dir = tempDir('rb-tmpdir-full-');
    const small = join(dir, 'small');
    mkdirSync(small);
    const mounted = spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=64k', 'tmpfs', small], { encoding: 'utf8' });
    if (mounted.status !== 0) ctx.skip(`cannot mount a tmpfs here: ${mounted.stderr.trim()}`);
    try {
      const r = run(['observe', '--results', '-', '--state', join(dir, 'state.db')], { TMPDIR: small }, results(1 << 20));
      expect(r.status, r.stderr).toBe(2);
      expect(r.stderr).toBe(`rollout-budget: cannot write the copy of stdin in ${small} ($TMPDIR): ENOSPC; free space there, or set TMPDIR to a folder on a disk with room\n`);
      expect(readdirSync(small)).toEqual([]);
      expect(existsSync(join(dir, 'state.db'))).toBe(false);
    } finally {
      spawnSync('umount', [small]);
      rmdirSync(small);
    }
  });
});
