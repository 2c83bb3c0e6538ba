import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');

/**
 * A folder of ../shared/upstream (the trainers' published code, read-only): RB_UPSTREAM, else
 * ../shared/upstream beside the checkout (CI), else two levels up (a git worktree). Undefined
 * when absent; in CI (CI=true) an absent folder is a failure, not a skip.
 */
export function upstreamDir(name: string): string | undefined {
  const roots = [process.env.RB_UPSTREAM, join(ROOT, '..', 'shared', 'upstream'), join(ROOT, '..', '..', 'shared', 'upstream')];
  for (const root of roots) {
    if (root !== undefined && root !== '' && existsSync(join(root, name))) return join(root, name);
  }
  if (process.env.CI === 'true') throw new Error(`../shared/upstream/${name} is missing but CI=true: check out ../shared beside the repository (or set RB_UPSTREAM)`);
  console.warn(`../shared/upstream/${name} not found: skipping the tests that run its published code (set RB_UPSTREAM to its folder)`);
  return undefined;
}

/**
 * A Python 3 that imports numpy (Debian's /usr/bin/python3 with python3-numpy: run
 * .ci/setup-python.sh), or undefined; in CI a missing one is a failure.
 */
export function pythonWithNumpy(): string | undefined {
  for (const python of ['/usr/bin/python3', 'python3']) {
    const r = spawnSync(python, ['-c', 'import numpy'], { stdio: 'ignore' });
    if (r.status === 0) return python;
  }
  if (process.env.CI === 'true') throw new Error('no python3 with numpy but CI=true: run `bash .ci/setup-python.sh`');
  console.warn('no python3 with numpy: skipping the tests that run published Python code (bash .ci/setup-python.sh installs it)');
  return undefined;
}

/**
 * `python3` on PATH (any Python 3: the package python/ needs only its standard library), or
 * undefined with a warning; in CI (CI=true) a missing one is a failure. A machine with only
 * Node and npm runs `npm test` without it, skipping the Python tests.
 */
export function python3OnPath(purpose: string): string | undefined {
  const r = spawnSync('python3', ['-c', 'import sys; assert sys.version_info >= (3, 8)'], { stdio: 'ignore' });
  if (r.status === 0) return 'python3';
  if (process.env.CI === 'true') throw new Error(`no python3 on PATH but CI=true: ${purpose} needs it`);
  console.warn(`no python3 on PATH: skipping ${purpose} (install Python 3.8 or later to run it)`);
  return undefined;
}
