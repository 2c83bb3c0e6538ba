import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const CANDIDATES = ['/usr/bin/chromium', '/usr/bin/chromium-browser', '/usr/bin/google-chrome', '/usr/bin/google-chrome-stable'];

/** The headless browser for the rendering tests: CHROMIUM_PATH, else the first usual path that exists. */
export function findChromium(): string | undefined {
  const set = process.env.CHROMIUM_PATH;
  if (set !== undefined && set !== '') return existsSync(set) ? set : undefined;
  return CANDIDATES.find((p) => existsSync(p));
}

/**
 * Whether the Chromium tests run, and a message saying so. In CI (CI=true) a missing Chromium is
 * a failure, not a skip: .ci/run installs it with .ci/setup-chromium.sh.
 */
export function chromiumOrSkip(): string | undefined {
  const found = findChromium();
  if (found !== undefined) return found;
  const where = process.env.CHROMIUM_PATH === undefined || process.env.CHROMIUM_PATH === '' ? CANDIDATES.join(', ') : `CHROMIUM_PATH=${process.env.CHROMIUM_PATH}`;
  if (process.env.CI === 'true') throw new Error(`Chromium not found (${where}) but CI=true: run .ci/setup-chromium.sh before the tests`);
  console.warn(
    `report-render: Chromium not found (${where}): SKIPPING the headless rendering checks of report.html (each chart drawn, marks per panel, nothing outside its chart). `
    + 'The markup checks still run. Install it with `bash .ci/setup-chromium.sh` (Debian, as root) or set CHROMIUM_PATH.',
  );
  return undefined;
}

/** Opens a page in headless Chromium and returns the DOM after its scripts ran. */
export function renderedDom(chromium: string, file: string): string {
  const profile = mkdtempSync(join(tmpdir(), 'rb-chromium-'));
  try {
    return execFileSync(
      chromium,
      [
        '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
        '--disable-component-update', '--disable-sync', `--user-data-dir=${profile}`, '--virtual-time-budget=5000', '--window-size=1280,1000',
        '--dump-dom', `file://${file}`,
      ],
      { encoding: 'utf8', timeout: 60_000, stdio: ['ignore', 'pipe', 'ignore'], maxBuffer: 64 * 1024 * 1024 },
    );
  } finally {
    rmSync(profile, { recursive: true, force: true });
  }
}
