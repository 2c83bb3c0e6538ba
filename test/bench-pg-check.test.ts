import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from './service-helpers.js';

// `npm run bench` with RB_PG_URL set and no server there stops at once with one line (its
// PostgreSQL sections would otherwise fail minutes in, with a stack), the password hidden.
describe('npm run bench with RB_PG_URL and no server', () => {
  it('says so in one line and exits 2 before its first section', () => {
    const r = spawnSync(process.execPath, [join(ROOT, 'dist', 'scripts', 'bench.js'), 'observe'], {
      encoding: 'utf8',
      env: { ...process.env, RB_PG_URL: 'postgres://rb:s3cret-pw@127.0.0.1:1/nowhere' },
      timeout: 60_000,
    });
    expect(r.status, r.stderr).toBe(2);
    expect(r.stderr.trim()).toBe(
      'bench: RB_PG_URL postgres://rb:***@127.0.0.1:1/nowhere: no PostgreSQL server answers (connect ECONNREFUSED 127.0.0.1:1); start one (.ci/setup-postgres.sh start prints the URL) or unset RB_PG_URL',
    );
    expect(r.stdout).toBe(''); // no section started
  });
});

// A mistyped section or flag would otherwise start minutes of work (or end in a stack); --help
// would run the whole bench.
describe('npm run bench with a mistyped section or flag, or --help', () => {
  const bench = (...args: string[]) => spawnSync(process.execPath, [join(ROOT, 'dist', 'scripts', 'bench.js'), ...args], { encoding: 'utf8', timeout: 60_000 });

  it('names the mistake in one line and exits 2 before its first section', () => {
    const sections = 'sections: planner, startup, plan, observe, replay, service, verifier; flags: --large, --keep, --help';
    for (const [args, line] of [
      [['plan', 'obsrve'], `bench: unknown section "obsrve"; ${sections}`],
      [['plan', '--larg'], `bench: unknown flag "--larg"; ${sections}`],
    ] as const) {
      const r = bench(...args);
      expect(r.status, r.stderr).toBe(2);
      expect(r.stderr.trim()).toBe(line);
      expect(r.stdout).toBe('');
    }
  });

  it('--help prints the usage and runs nothing', () => {
    const r = bench('--help');
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toContain('usage: npm run bench [-- [section ...] [--large] [--keep]]');
    expect(r.stdout).not.toContain('rollout-budget bench (node');
  });
});
