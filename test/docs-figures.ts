import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'vitest';
import type { ShellRun } from './docs-run.js';

/**
 * Figures the docs quote from a command's output, checked against what the command printed
 * when test/docs-commands.test.ts ran it. Each check reads the figure from the doc's own text
 * (so the doc and its command cannot drift apart unnoticed) and from the run.
 */
export interface FigureCheck {
  readonly doc: string;
  /** Matched against the command as written (without comment or `&`). */
  readonly command: RegExp;
  readonly what: string;
  check(run: ShellRun, at: CheckContext): void | Promise<void>;
}

export interface CheckContext {
  /** The copy of the clone the doc's commands run in. */
  readonly cwd: string;
  /** The doc's text. */
  readonly doc: string;
  /** Runs another command as the doc's commands are run, from `cwd` or another folder. */
  shell(command: string, cwd?: string): Promise<ShellRun>;
  /** A folder outside the clone. */
  readonly outside: string;
}

/** A doc's text with every run of whitespace made one space (quoted output may wrap). */
const flat = (text: string) => text.replace(/\s+/g, ' ');

/** The capture group of `pattern` in the doc, which must be there. */
function quoted(doc: string, pattern: RegExp, what: string): string {
  const m = pattern.exec(flat(doc));
  if (m === null) throw new Error(`the doc no longer quotes ${what} (${pattern}); update test/docs-figures.ts with it`);
  return m[1]!;
}

/** The rows of the first Markdown table whose header matches, as column → cell. */
export function markdownTable(doc: string, header: RegExp): Map<string, string>[] {
  const lines = doc.split('\n');
  const start = lines.findIndex((l) => header.test(l));
  if (start < 0) throw new Error(`no table with a header like ${header}`);
  const cells = (l: string) => l.trim().replace(/^\||\|$/g, '').split('|').map((c) => c.trim());
  const names = cells(lines[start]!);
  const rows: Map<string, string>[] = [];
  for (let i = start + 2; i < lines.length && lines[i]!.trim().startsWith('|'); i++) {
    rows.push(new Map(cells(lines[i]!).map((c, k) => [names[k]!, c])));
  }
  return rows;
}

/** The table `replay`/`simulate` print: the header line starting "policy", columns 2+ spaces apart. */
export function printedTable(stdout: string): Map<string, Map<string, string>> {
  const lines = stdout.split('\n');
  const start = lines.findIndex((l) => /^policy\s{2,}/.test(l));
  if (start < 0) throw new Error(`no printed table in:\n${stdout}`);
  const names = lines[start]!.trim().split(/\s{2,}/);
  const rows = new Map<string, Map<string, string>>();
  for (let i = start + 1; i < lines.length && lines[i]!.trim() !== ''; i++) {
    const cells = lines[i]!.trim().split(/\s{2,}/);
    rows.set(cells[0]!, new Map(cells.map((c, k) => [names[k]!, c])));
  }
  return rows;
}

const unbold = (cell: string) => cell.replace(/\*\*/g, '').trim();

export const figureChecks: readonly FigureCheck[] = [
  {
    doc: 'README.md',
    command: /^npm start$/,
    what: "the replay table's every cell, the one-line result, the headline ratios and the report files",
    check(run, { cwd, doc }) {
      const printed = printedTable(run.stdout);
      const rows = markdownTable(doc, /^\| policy \| effective ratio \|/);
      let cells = 0;
      for (const row of rows) {
        const policy = unbold(row.get('policy')!).split(' ')[0]!;
        const got = printed.get(policy);
        expect(got, `README row "${policy}" is not in the printed table`).toBeDefined();
        for (const [column, cell] of row) {
          if (column === 'policy') continue;
          expect(got!.get(column), `README replay table, ${policy}, "${column}": printed ${got!.get(column)}`).toMatch(new RegExp(`^${unbold(cell).replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`));
          cells++;
        }
      }
      expect(cells).toBeGreaterThanOrEqual(7 * 8);
      expect(run.stdout).toMatch(/^Our default \(.*\) against uniform: .*×.*$/m);
      const m = JSON.parse(readFileSync(join(cwd, 'out', 'replay', 'metrics.json'), 'utf8')) as { default_policy: string; policies: { name: string; totals: Record<string, number> }[] };
      const totals = (name: string) => m.policies.find((p) => p.name === name)!.totals;
      const ours = totals(m.default_policy);
      const uniform = totals('uniform');
      const headline = /effective-gradient ratio of ([\d.]+)×, informative groups of ([\d.]+)× and hard-prompt positives of ([\d.]+)×/.exec(flat(doc));
      expect(headline, 'README headline ratios').not.toBeNull();
      const ratio = (key: string) => (ours[key]! / uniform[key]!).toFixed(3);
      expect([ratio('effective_ratio'), ratio('informative_groups'), ratio('hard_positives')]).toEqual(headline!.slice(1, 4));
      for (const f of ['report.html', 'metrics.json', 'summary.md']) expect(existsSync(join(cwd, 'out', 'replay', f)), f).toBe(true);
    },
  },
  {
    doc: 'docs/executor.md',
    command: /^rollout-budget loop .*--steps 4\b/,
    what: 'one JSON line a step, the first as the doc shows it',
    check(run, { doc }) {
      const example = quoted(doc, /e\.g\. `(\{"step":0[^`]*\})`/, 'the loop example line');
      const lines = run.stdout.trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
      expect(lines.map((l) => l.step)).toEqual([0, 1, 2, 3]);
      const shown = [...example.matchAll(/"(\w+)":(-?[\d.]+)/g)];
      expect(shown.length).toBeGreaterThanOrEqual(4);
      for (const [, key, value] of shown) expect(lines[0]![key!], `loop's first line, "${key}"`).toBe(Number(value));
    },
  },
  {
    doc: 'docs/executor.md',
    command: /^rollout-budget grade /,
    what: "grade's summary line, and the plan and batch input equal to the fixture's, byte for byte",
    check(run, { cwd, doc }) {
      expect(flat(run.stderr)).toContain(quoted(doc, /prints `(graded [^`]+)`/, "grade's summary"));
      for (const f of ['plan.json', 'batch-input.jsonl']) {
        expect(readFileSync(join(cwd, f), 'utf8'), `${f} vs fixtures/qwen-math100-k8/${f}`).toBe(readFileSync(join(cwd, 'fixtures', 'qwen-math100-k8', f), 'utf8'));
      }
    },
  },
  {
    doc: 'docs/executor.md',
    command: /^rollout-budget observe --results results\.jsonl --state grade\.db$/,
    what: "observe's summary of the graded rollouts",
    check(run, { doc }) {
      expect(run.stdout.trim()).toBe(quoted(doc, /`observe` prints `(\{"applied"[^`]*\})`/, "observe's summary"));
    },
  },
  {
    doc: 'docs/service.md',
    command: /--max-n 9007199254740991/,
    what: 'the rollouts placed with max_n capped at 4,096',
    check(run, { doc }) {
      const placed = Number(quoted(doc, /places ([\d,]+) rollouts/, 'the rollouts placed').replace(/,/g, ''));
      expect((JSON.parse(run.stdout) as { totals: { rollouts: number } }).totals.rollouts).toBe(placed);
    },
  },
  {
    doc: 'docs/trainers.md',
    command: /^pip install --no-build-isolation \.\/python$/,
    what: 'the package imports outside the clone, from the environment pip installed it into',
    async check(_run, { shell, outside }) {
      const r = await shell(`python3 -c 'import rollout_budget, sys; print(rollout_budget.__file__); print(sys.prefix)'`, outside);
      expect(r.code, r.stderr).toBe(0);
      const [file, prefix] = r.stdout.trim().split('\n');
      expect(file!.startsWith(`${prefix!}/`), `${file} under ${prefix}`).toBe(true);
    },
  },
];
