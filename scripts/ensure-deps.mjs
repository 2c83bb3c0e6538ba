// Runs before `npm start` and `npm test` (plain JS: nothing is built yet). On a fresh clone,
// where node_modules is missing or incomplete, it installs the locked dependencies with
// `npm ci`, so the README's two quick-start commands work as the first thing you type.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const needed = ['typescript', 'vitest', 'commander', 'better-sqlite3/build/Release/better_sqlite3.node'];
const missing = needed.filter((p) => !existsSync(join(root, 'node_modules', p)));
if (missing.length > 0) {
  console.error(`rollout-budget: installing dependencies (missing: ${missing.join(', ')}) with npm ci ...`);
  const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
  const r = spawnSync(npm, ['ci', '--no-audit', '--no-fund'], { cwd: root, stdio: 'inherit' });
  if (r.status !== 0) process.exit(r.status ?? 1);
}
