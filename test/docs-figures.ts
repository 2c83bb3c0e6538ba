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
  /** Another doc's text (README.md, docs/replay.md, ...). */
  text(file: string): string;
}

/**
 * Figures a doc quotes in its prose from a command it names inline (not in a commands block):
 * the test runs `command` at the end of the doc's commands, from the clone's root, and checks.
 * Only commands that take seconds: the seeds 0–4 tables (minutes) are not re-run here.
 */
export interface FigureRun {
  readonly doc: string;
  readonly command: string;
  readonly what: string;
  check(run: ShellRun, at: CheckContext): void;
}

const unbold = (cell: string) => cell.replace(/\*\*/g, '').trim();

/** A doc's text with every run of whitespace made one space (quoted output may wrap). */
const flat = (text: string) => text.replace(/\s+/g, ' ');

/** The capture group of `pattern` in the doc, which must be there. */
function quoted(doc: string, pattern: RegExp, what: string): string {
  const m = pattern.exec(flat(doc));
  if (m === null) throw new Error(`the doc no longer quotes ${what} (${pattern}); update test/docs-figures.ts with it`);
  return m[1]!;
}

/** The rows of every Markdown table whose header matches, in order, as column → cell. */
export function markdownTables(doc: string, header: RegExp): Map<string, string>[][] {
  const lines = doc.split('\n');
  const cells = (l: string) => l.trim().replace(/^\||\|$/g, '').split('|').map((c) => c.trim());
  const tables: Map<string, string>[][] = [];
  lines.forEach((line, start) => {
    if (!header.test(line)) return;
    const names = cells(line);
    const rows: Map<string, string>[] = [];
    for (let i = start + 2; i < lines.length && lines[i]!.trim().startsWith('|'); i++) {
      rows.push(new Map(cells(lines[i]!).map((c, k) => [names[k]!, c])));
    }
    tables.push(rows);
  });
  if (tables.length === 0) throw new Error(`no table with a header like ${header}`);
  return tables;
}

/** The first such table. */
export const markdownTable = (doc: string, header: RegExp) => markdownTables(doc, header)[0]!;

/**
 * Every cell of a doc's table equals the printed one (a printed cell may go on after it: the
 * README leaves out the rollouts' ratio); wall-clock columns are left out. Returns the count.
 */
function sameTable(rows: readonly Map<string, string>[], printed: Map<string, Map<string, string>>, where: string): number {
  let cells = 0;
  for (const row of rows) {
    const policy = unbold(row.get('policy')!).split(' ')[0]!;
    const got = printed.get(policy);
    expect(got, `${where}: row "${policy}" is not in the printed table`).toBeDefined();
    for (const [column, cell] of row) {
      if (column === 'policy' || column === 'plan ms/step') continue;
      const escaped = unbold(cell).replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
      expect(got!.get(column), `${where}, ${policy}, "${column}": printed ${got!.get(column)}`).toMatch(new RegExp(`^${escaped}`));
      cells++;
    }
  }
  return cells;
}

/** The ratio to uniform in a printed cell, "0.681 (1.35×)" → "1.35". */
const ratioIn = (cell: string | undefined) => /\(([\d.]+)×\)/.exec(cell ?? '')?.[1];

/** The ratios of the printed demo's rows ("informative groups ...   2439   2282   1.07×") and their two values. */
function demoRows(stdout: string): Map<string, string[]> {
  return new Map(stdout.split('\n').map((l) => /^(.+?)\s{2,}(\S+)\s+(\S+)\s+([\d.]+)×$/.exec(l.trim())).filter((m) => m !== null).map((m) => [m![1]!, [m![2]!, m![3]!, m![4]!]]));
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


/** The text of a doc's section, from its "## title..." heading to the next "## ". */
function section(text: string, title: string): string {
  const start = text.indexOf(`\n## ${title}`);
  if (start < 0) throw new Error(`no section "## ${title}"; update test/docs-figures.ts`);
  const end = text.indexOf('\n## ', start + 1);
  return text.slice(start, end < 0 ? undefined : end);
}

const FULL_TABLE = /^\| policy \| effective ratio \| informative groups \| informative \/ 1k rollouts \| all-correct /;
/** docs/replay.md's simulation tables, in the order of SCENARIOS. */
const simulationTables = (text: string) => markdownTables(section(text, 'Measured: simulations'), FULL_TABLE);
/** docs/replay.md's replay tables: the default stream, then --stream shared. */
const replayTables = (text: string) => markdownTables(section(text, 'Measured: replay of the shipped real fixture'), FULL_TABLE);

export const figureChecks: readonly FigureCheck[] = [
  {
    doc: 'README.md',
    command: /^npm start$/,
    what: "the replay table's every cell (README and docs/replay.md, which says npm start runs its replay), the one-line result, the headline ratios and the report files",
    check(run, { cwd, doc, text }) {
      const cells = sameTable(markdownTable(doc, /^\| policy \| effective ratio \|/), printedTable(run.stdout), 'README replay table');
      expect(cells).toBeGreaterThanOrEqual(7 * 8);
      expect(sameTable(replayTables(text('docs/replay.md'))[0]!, printedTable(run.stdout), 'docs/replay.md, replay, consumed')).toBeGreaterThanOrEqual(7 * 15);
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

const LOG = 'fixtures/oneshot-rlvr-dsr-sub/visits.jsonl';
const SCENARIOS = ['long-cot-competition', 'rl-math-pool', 'easy-pool'];
/** fixtures/scenarios/stress/, in docs/cold-start.md's table. */
const STRESS = ['plain-one-epoch', 'plain-two-epoch', 'plain-hard', 'plain-bimodal', 'plain-easy', 'plain-long-cot-tokens', 'part-hints', 'loose-budget', 'strong-drift', 'mostly-hard-once', 'groups-once-16', 'fast-learner'];

/** The ratios of the "Our default ... against uniform: ..." line simulate prints last, by metric: "0.91× (0.91–0.92×)". */
function headline(stdout: string): Map<string, string> {
  const line = stdout.split('\n').filter((l) => l.startsWith('Our default')).at(-1) ?? '';
  const cells = [...line.matchAll(/([\d.]+× \([\d.]+–[\d.]+×\)) (effective ratio|informative groups per Mtok|informative groups|hard positives)/g)];
  if (cells.length !== 4) throw new Error(`no headline with four ratios in:\n${stdout}`);
  return new Map(cells.map((m) => [m[2]!, m[1]!]));
}

export const figureRuns: readonly FigureRun[] = [
  {
    doc: 'README.md',
    command: 'rollout-budget demo --steps 20',
    what: "the demo's first 20 steps, as the prose quotes them",
    check(run, { doc }) {
      const [ours, logged, informative, hard] = quoted(doc, /(?:below|above) uniform-8's \(([\d.]+ vs [\d.]+; informative groups [\d.]+×, hard positives [\d.]+×)\)/, 'the first 20 steps').match(/[\d.]+(?=[ ;×,]|$)/g)!;
      const rows = demoRows(run.stdout);
      expect(rows.get('effective ratio')!.slice(0, 2)).toEqual([ours, logged]);
      expect(rows.get('informative groups (reward variance)')![2]).toBe(informative);
      expect(rows.get('hard-prompt positives (p ≤ 0.2)')![2]).toBe(hard);
    },
  },
  {
    doc: 'README.md',
    command: 'rollout-budget demo --steps 10',
    what: "the demo's first 10 steps (nearly every prompt new), as the prose quotes them",
    check(run, { doc }) {
      const m = /the first 10 steps alone.*?: ([\d.]+) vs ([\d.]+) \(([\d.]+)×; informative groups ([\d.]+)×, hard positives ([\d.]+)×\)/.exec(flat(doc));
      expect(m, 'the first 10 steps').not.toBeNull();
      const rows = demoRows(run.stdout);
      expect(m!.slice(1, 6)).toEqual([...rows.get('effective ratio')!, rows.get('informative groups (reward variance)')![2], rows.get('hard-prompt positives (p ≤ 0.2)')![2]]);
    },
  },
  {
    doc: 'README.md',
    command: 'rollout-budget demo --steps 498',
    what: "the demo over all steps, as the prose quotes it, and that one step more is refused",
    check(run, { doc }) {
      const all = quoted(doc, /\(all (\d+ steps: [\d.]+×, [\d.]+×, [\d.]+×)\)/, 'the demo over all steps');
      const rows = demoRows(run.stdout);
      expect(all).toBe(`498 steps: ${rows.get('informative groups (reward variance)')![2]}×, ${rows.get('hard-prompt positives (p ≤ 0.2)')![2]}×, ${rows.get('effective ratio')![2]}×`);
      expect(flat(doc)).toContain('More steps than the fixture has (498) is an error');
    },
  },
  {
    doc: 'README.md',
    command: `rollout-budget replay --log ${LOG} --stream shared --quiet`,
    what: 'the shared-stream figures the replay section quotes',
    check(run, { doc }) {
      const t = printedTable(run.stdout);
      const r = (p: string, c: string) => ratioIn(t.get(p)?.get(c));
      const text = quoted(doc, /(`greso` then reaches .*?\([\d.]+×, [\d.]+×, [\d.]+×\))/, 'the shared-stream sentence');
      expect(text).toBe(`\`greso\` then reaches ${r('greso', 'effective ratio')}× \`uniform\` on ratio and informative groups and ${r('greso', 'hard positives')}× on hard positives, \`mopps\` ${r('mopps', 'effective ratio')}× and ${r('mopps', 'hard positives')}×, ours unchanged (${r('bayes', 'effective ratio')}×, ${r('bayes', 'informative groups')}×, ${r('bayes', 'hard positives')}×)`);
      expect(r('greso', 'informative groups')).toBe(r('greso', 'effective ratio'));
    },
  },
  {
    doc: 'docs/replay.md',
    command: `rollout-budget replay --log ${LOG} --stream shared --quiet`,
    what: 'the replay table of the shared stream, every cell but the planning time (the default stream\'s: with npm start)',
    check(run, { doc }) {
      expect(sameTable(replayTables(doc)[1]!, printedTable(run.stdout), 'docs/replay.md, replay, shared')).toBeGreaterThanOrEqual(7 * 15);
    },
  },
  {
    doc: 'README.md',
    command: `rollout-budget replay --log ${LOG} --rounds 1 --policies uniform,bayes --quiet`,
    what: 'our default in one round a step',
    check(run, { doc }) {
      const t = printedTable(run.stdout);
      const r = (c: string) => ratioIn(t.get('bayes')?.get(c));
      expect(quoted(doc, /the same defaults give ([\d.]+× \/ [\d.]+× \/ [\d.]+×)/, 'the one-round figures')).toBe(`${r('effective ratio')}× / ${r('informative groups')}× / ${r('hard positives')}×`);
      // "Rounds cost ...; in exchange informative groups go from <one round> to <two rounds>": the
      // two-round figures are the headline's (checked against npm start), to two decimals.
      const gain = /informative groups go from ([\d.]+)× to ([\d.]+)× and hard positives from ([\d.]+)× to ([\d.]+)×/.exec(flat(doc));
      expect(gain, 'the rounds paragraph').not.toBeNull();
      const headline = /effective-gradient ratio of ([\d.]+)×, informative groups of ([\d.]+)× and hard-prompt positives of ([\d.]+)×/.exec(flat(doc))!;
      expect(gain!.slice(1, 5)).toEqual([r('informative groups'), Number(headline[2]).toFixed(2), r('hard positives'), Number(headline[3]).toFixed(2)]);
    },
  },
  // docs/cold-start.md's hint-quality table: the rows a shipped scenario gives as it is (issue 14).
  ...([['shipped', 'shipped', ''], ['none', 'none', ' --no-hints']] as const).map(([row, out, flag]): FigureRun => ({
    doc: 'docs/cold-start.md',
    command: `rollout-budget simulate --scenario fixtures/scenarios/one-epoch-pool.json --steps 32 --policies uniform,bayes${flag} --out out/cold-${out} --quiet`,
    what: `the hint-quality table's "${row}" row (one-epoch pool, 32 steps, seed 0)`,
    check(_run, { cwd, doc }) {
      const m = JSON.parse(readFileSync(join(cwd, 'out', `cold-${out}`, 'metrics.json'), 'utf8')) as { policies: { name: string; totals: Record<string, number> }[] };
      const totals = (name: string) => m.policies.find((p) => p.name === name)!.totals;
      const ratio = (key: string) => `${(totals('bayes')[key]! / totals('uniform')[key]!).toFixed(3)}×`;
      const found = markdownTable(doc, /^\| hints \| effective ratio \|/).find((r) => unbold(r.get('hints')!).startsWith(row));
      expect(found, `a "${row}" row`).toBeDefined();
      expect(['effective ratio', 'informative groups', 'hard positives'].map((c) => unbold(found!.get(c)!)))
        .toEqual([ratio('effective_ratio'), ratio('informative_groups'), ratio('hard_positives')]);
    },
  })),
  // docs/cold-start.md's stress scenarios: every row as the command's last line prints it (seeds 0–9, seconds each).
  ...STRESS.map((name): FigureRun => ({
    doc: 'docs/cold-start.md',
    command: `rollout-budget simulate --scenario fixtures/scenarios/stress/${name}.json --policies uniform,bayes --seeds 0..9 --quiet`,
    what: `the stress table's ${name} row (seeds 0–9)`,
    check(run, { doc }) {
      const row = markdownTable(doc, /^\| scenario \| what \| effective ratio \|/).find((r) => r.get('scenario') === `\`${name}\``);
      expect(row, `a row for ${name}`).toBeDefined();
      const printed = headline(run.stdout);
      for (const column of ['effective ratio', 'informative groups', 'hard positives', 'informative groups per Mtok']) {
        expect(row!.get(column), `${name}, ${column}`).toBe(printed.get(column));
      }
    },
  })),
  {
    doc: 'docs/cold-start.md',
    command: 'rollout-budget simulate --scenario fixtures/scenarios/stress/plain-one-epoch.json --policies uniform,bayes --seeds 0..9 --rounds 1 --quiet',
    what: 'one plan a step plans the pool without metadata as uniform',
    check(run, { doc }) {
      expect(flat(doc)).toContain('With one plan a step (`--rounds 1`) such a pool is planned exactly as `uniform` (1.00× on every column, seeds 0–9, `plain-one-epoch`)');
      expect([...headline(run.stdout).values()]).toEqual(Array(4).fill('1.00× (1.00–1.00×)'));
    },
  },
  ...SCENARIOS.map((name, k): FigureRun => ({
    doc: 'docs/replay.md',
    command: `rollout-budget simulate --scenario fixtures/scenarios/${name}.json --quiet`,
    what: `the ${name} table (seed 0), every cell but the planning time, and the README's figures from it`,
    check(run, { doc, text }) {
      const printed = printedTable(run.stdout);
      expect(sameTable(simulationTables(doc)[k]!, printed, `docs/replay.md, ${name}`)).toBeGreaterThanOrEqual(8 * 15);
      const r = (p: string, c: string) => ratioIn(printed.get(p)?.get(c));
      const readme = text('README.md');
      if (name === 'long-cot-competition') {
        expect(quoted(readme, /million tokens reaches \*\*([\d.]+)×\*\* `uniform`/, 'long-CoT informative / Mtok')).toBe(r('bayes', 'informative / Mtok'));
        const tokens = (p: string) => Number(printed.get(p)!.get('tokens'));
        expect(quoted(readme, /(with [\d.]+× informative groups and [\d.]+× hard positives, spending [\d.]+× `uniform`'s tokens)/, 'long-CoT figures'))
          .toBe(`with ${r('bayes', 'informative groups')}× informative groups and ${r('bayes', 'hard positives')}× hard positives, spending ${(tokens('bayes') / tokens('uniform')).toFixed(2)}× \`uniform\`'s tokens`);
        expect(quoted(readme, /over the token budget\s+at (\d+)% of steps/, 'long-CoT steps over the token budget')).toBe(String(Math.round((1 - Number(printed.get('bayes')!.get('within budget'))) * 100)));
        expect(quoted(readme, /The planner with the true pass rates \(`oracle`\) reaches ([\d.]+)×/, 'long-CoT oracle')).toBe(r('oracle', 'informative / Mtok'));
      } else if (name === 'rl-math-pool') {
        expect(quoted(readme, /\*\*RL math pool:\*\* ([\d.]+× ratio, [\d.]+× informative, [\d.]+× hard)/, 'RL math pool figures'))
          .toBe(`${r('bayes', 'effective ratio')}× ratio, ${r('bayes', 'informative groups')}× informative, ${r('bayes', 'hard positives')}× hard`);
      } else {
        expect(quoted(readme, /\*\*Easy pool:\*\* ([\d.]+×, [\d.]+×, [\d.]+×)/, 'easy pool figures'))
          .toBe(`${r('bayes', 'effective ratio')}×, ${r('bayes', 'informative groups')}×, ${r('bayes', 'hard positives')}×`);
      }
    },
  })),
];
