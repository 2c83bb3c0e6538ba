import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  LoggedRun, createReplayPolicyRegistry, parseVisits, replayEnvironment, reportHtml, runPolicies, writeReport,
} from '../src/index.js';

const chromium = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const hasChromium = existsSync(chromium);

/** Opens a page in headless Chromium and returns the DOM after its scripts ran. */
function renderedDom(file: string): string {
  const profile = mkdtempSync(join(tmpdir(), 'rb-chromium-'));
  return execFileSync(
    chromium,
    [
      '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', `--user-data-dir=${profile}`, '--virtual-time-budget=5000',
      '--dump-dom', `file://${file}`,
    ],
    { encoding: 'utf8', timeout: 60_000, stdio: ['ignore', 'pipe', 'ignore'] },
  );
}

function drawnCounts(dom: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const m of dom.matchAll(/<svg[^>]*\bid="(chart-[a-z]+)"[^>]*>/g)) {
    const drawn = /data-drawn="(\d+)"/.exec(m[0]);
    out[m[1]!] = drawn === null ? -1 : Number(drawn[1]);
  }
  return out;
}

function smallReport(dir: string): string {
  const visits = parseVisits(readFileSync(new URL('../fixtures/oneshot-rlvr-dsr-sub/visits.jsonl', import.meta.url), 'utf8'), 'visits.jsonl');
  const run = new LoggedRun(visits.filter((v) => v.step < 30));
  const results = runPolicies(replayEnvironment(run), { policies: ['uniform', 'knapsack-rl', 'bayes'], registry: createReplayPolicyRegistry(), minN: 2, maxN: 64, seed: 0 });
  writeReport(dir, { kind: 'replay', title: 'render test', source: 'fixture steps 0..29', options: {}, notes: ['test'], results });
  return join(dir, 'report.html');
}

/** Geometry attributes of the chart marks that are not finite numbers in [0, 720], as written. */
function badGeometry(html: string): string[] {
  const bad: string[] = [];
  for (const mark of html.matchAll(/<(polyline|rect|circle) data-mark="1"([^>]*)>/g)) {
    for (const [, attr, , value] of mark[2]!.matchAll(/\s((points|x|y|width|height|cx|cy|r)="([^"]*)")/g)) {
      const tokens = value!.split(/[\s,]+/).filter((t) => t !== '');
      if (tokens.length === 0 || !tokens.every((t) => /^-?\d+(\.\d+)?$/.test(t) && Number(t) >= 0 && Number(t) <= 720)) bad.push(attr);
    }
  }
  return bad;
}

describe('report.html', () => {
  it('is self-contained: no external URL is loaded', () => {
    const html = readFileSync(smallReport(mkdtempSync(join(tmpdir(), 'rb-report-'))), 'utf8');
    expect(html).not.toMatch(/<(script|link|img)[^>]+(src|href)=/i);
    expect(html.match(/<svg class="chart"/g)?.length).toBe(3);
  });

  it.runIf(hasChromium)('headless Chromium draws all three charts (and the check sees an empty chart as not drawn)', () => {
    const dir = mkdtempSync(join(tmpdir(), 'rb-report-'));
    const dom = renderedDom(smallReport(dir));
    expect(dom).toContain('data-charts-drawn="3/3"');
    const counts = drawnCounts(dom);
    expect(Object.keys(counts).sort()).toEqual(['chart-calibration', 'chart-effective', 'chart-histogram']);
    expect(counts['chart-effective']).toBe(3); // one line a policy
    expect(counts['chart-histogram']).toBeGreaterThan(10);
    expect(counts['chart-calibration']).toBeGreaterThanOrEqual(5); // knapsack-rl and bayes predict
    // Control: a report with nothing to draw is seen as undrawn, so the check can fail.
    const empty = join(dir, 'empty.html');
    writeFileSync(empty, reportHtml([], { title: 'empty', lines: [] }));
    const emptyDom = renderedDom(empty);
    expect(emptyDom).toContain('data-charts-drawn="0/3"');
  });

  it('the SVG markup holds marks with finite, in-range geometry (the check used when Chromium is missing)', () => {
    // Chromium is not installed here (run .ci/setup-chromium.sh); this checks the markup instead.
    const html = readFileSync(smallReport(mkdtempSync(join(tmpdir(), 'rb-report-'))), 'utf8');
    expect(html.match(/<(polyline|rect|circle) data-mark="1"/g)?.length).toBeGreaterThan(15);
    expect(badGeometry(html)).toEqual([]);
    // Controls: the check sees NaN, infinities, out-of-range and empty coordinates.
    expect(badGeometry('<rect data-mark="1" x="NaN" y="3" width="4" height="5"/>')).toEqual(['x="NaN"']);
    expect(badGeometry('<polyline data-mark="1" points="1,2 Infinity,4"/>')).toEqual(['points="1,2 Infinity,4"']);
    expect(badGeometry('<circle data-mark="1" cx="-1" cy="800" r=""/>')).toEqual(['cx="-1"', 'cy="800"', 'r=""']);
  });
});
