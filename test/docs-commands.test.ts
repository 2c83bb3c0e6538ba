// Issue 16: every command in README.md and docs/*.md runs as shown.
//
// Which blocks are commands, and how a doc marks one not to run: test/docs-blocks.ts (in short:
// a fenced block with no language, or sh/bash/shell, is commands, every line of it; `text` and
// the other languages are not run; `<!-- not run: reason -->` before a commands block skips it;
// `<!-- output of: command -->` before a block runs the command and checks the block is in its
// output). How they are run: test/docs-run.ts (a copy of the clone per doc, `rollout-budget` on
// PATH as `npm link` would put it, through bash, a doc's commands in order in one folder, a
// command ending in `&` started in the background and waited for until it is listening).
//
// What differs from typing them, and why:
// - `npm test` is not run: it is this suite, which runs this test.
// - Ports the docs name (`--port 8000`, `127.0.0.1:8000`) are mapped to free ones, the same
//   way in every command of a doc: other jobs on the machine may hold the documented ones.
// - `pip` installs into a fresh virtual environment (the doc's "trainer's environment"),
//   never into the Python the tests run with.
// Figures the docs quote from a command's output are checked by test/docs-figures.ts, and so are
// figures quoted in prose from commands named inline that take seconds (after the doc's commands).
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { COMMAND_LANGS, blocksOf, commandsOf, type DocBlock, type DocCommand } from './docs-blocks.js';
import { figureChecks, figureRuns, type CheckContext } from './docs-figures.js';
import { cliShim, copyClone, freePort, portsIn, runShell, startBackground, withPorts, type Background, type ShellRun } from './docs-run.js';
import { tempDir } from './temp.js';

const ROOT = join(import.meta.dirname, '..');
const DOCS = ['README.md', ...readdirSync(join(ROOT, 'docs')).filter((f) => f.endsWith('.md')).sort().map((f) => `docs/${f}`)];
/** Commands the docs show that this test does not run, and why. */
const NOT_RUN_HERE: readonly { command: RegExp; reason: string }[] = [
  { command: /^npm test$/, reason: 'the test suite itself, which runs this test' },
];
const COMMAND_TIMEOUT_MS = 8 * 60_000;
/**
 * Figure runs of the same command (a replay two docs quote) run once: their output does not
 * depend on which doc's copy of the clone they run in.
 */
const figureRunCache = new Map<string, Promise<ShellRun>>();

type Step =
  | { kind: 'run'; label: string; command: DocCommand }
  | { kind: 'output'; label: string; block: DocBlock; command: string }
  | { kind: 'skip'; label: string; reason: string };

const firstLine = (text: string) => (text.includes('\n') ? `${text.split('\n')[0]!.replace(/\s*\\$/, '')} ...` : text);

/** A doc's steps, in order: commands to run, outputs to check, and what is skipped. */
function stepsOf(file: string, blocks: readonly DocBlock[]): Step[] {
  return blocks.flatMap((block): Step[] => {
    if (block.outputOf !== undefined) {
      return [{ kind: 'output', label: `${file}:${block.line} output of ${block.outputOf}`, block, command: block.outputOf }];
    }
    if (!COMMAND_LANGS.includes(block.lang)) return [];
    return commandsOf(block).map((command): Step => {
      const label = `${file}:${command.line} ${firstLine(command.text)}`;
      const reason = block.notRun ?? NOT_RUN_HERE.find((n) => n.command.test(command.bare))?.reason;
      return reason === undefined ? { kind: 'run', label, command } : { kind: 'skip', label, reason };
    });
  });
}

const docs = DOCS.map((file) => {
  const text = readFileSync(join(ROOT, file), 'utf8');
  const blocks = blocksOf(file, text);
  return { file, text, blocks, steps: stepsOf(file, blocks) };
});
const allSteps = docs.flatMap((d) => d.steps);

afterAll(() => {
  const ran = allSteps.filter((s) => s.kind !== 'skip');
  const skipped = allSteps.filter((s): s is Extract<Step, { kind: 'skip' }> => s.kind === 'skip');
  const other = docs.flatMap((d) => d.blocks.filter((b) => !COMMAND_LANGS.includes(b.lang) && b.outputOf === undefined));
  console.log(
    [
      `documented commands: ${ran.length} run (${ran.filter((s) => s.kind === 'output').length} of them with their output checked) in ${DOCS.length} docs; ${skipped.length} not run:`,
      ...skipped.map((s) => `  ${s.label} — ${s.reason}`),
      `${other.length} blocks are not commands (synopses, output, code; by their language):`,
      ...other.map((b) => `  ${b.file}:${b.line} [${b.lang}] ${firstLine(b.body.find((l) => l.trim() !== '') ?? '')}`),
    ].join('\n'),
  );
});

describe('the documented commands are found', () => {
  it('every doc is read, the quick start is among the commands run, and only npm test is left out of it', () => {
    const runs = allSteps.filter((s) => s.kind === 'run').map((s) => (s as { command: DocCommand }).command);
    // Counted so the test fails if the extraction silently finds nothing.
    expect(runs.length).toBeGreaterThanOrEqual(8);
    expect(runs.map((c) => `${c.file} ${c.bare}`)).toContain('README.md npm start');
    expect(allSteps.filter((s) => s.kind === 'output').length).toBeGreaterThanOrEqual(1);
    const quick = docs[0]!.blocks.find((b) => b.body.includes('npm start'))!;
    expect(quick.body.filter((l) => l.trim() !== '')).toEqual(['npm start', 'npm test']);
  });

  it('every figure check matches a command that runs', () => {
    for (const check of figureChecks) {
      const hits = allSteps.filter((s) => s.kind === 'run' && s.command.file === check.doc && check.command.test(s.command.bare));
      expect(hits.length, `${check.doc}: ${check.command} (${check.what})`).toBe(1);
    }
  });

  it('every doc a figure run belongs to is read', () => {
    for (const run of figureRuns) expect(DOCS, run.command).toContain(run.doc);
  });

  it('CI runs the README\'s test command', () => {
    expect(readFileSync(join(ROOT, '.ci', 'run'), 'utf8')).toMatch(/^npm test$/m);
  });
});

for (const doc of docs.filter((d) => d.steps.length > 0 || figureRuns.some((f) => f.doc === d.file))) {
  describe(doc.file, () => {
    const extra = figureRuns.filter((f) => f.doc === doc.file);
    const runnable = doc.steps.some((s) => s.kind !== 'skip') || extra.length > 0;
    const background: Background[] = [];
    let cwd = '';
    let outside = '';
    let env: NodeJS.ProcessEnv = {};
    let ports = new Map<number, number>();
    /** Why the pip commands cannot run here (no venv module outside CI): they skip with it. */
    let noVenv: string | undefined;

    beforeAll(async () => {
      if (!runnable) return;
      const work = tempDir('rb-docs-');
      cwd = join(work, 'clone');
      outside = work;
      copyClone(ROOT, cwd);
      const path = [cliShim(join(work, 'bin'), join(cwd, 'bin', 'rollout-budget.js'))];
      if (doc.steps.some((s) => s.kind === 'run' && /^pip\b/.test(s.command.bare))) {
        const venv = await runShell(`python3 -m venv '${join(work, 'venv')}'`, { cwd: work, env: process.env, timeoutMs: 120_000 });
        if (venv.code === 0) path.push(join(work, 'venv', 'bin'));
        else {
          // As the PostgreSQL and Chromium tests do: a skip with a message here, a failure in CI.
          noVenv = `cannot make a virtual environment for the pip commands (python3 -m venv: ${venv.stderr.trim()}); on Debian: apt-get install python3-venv, or bash .ci/setup-python.sh`;
          if (process.env.CI === 'true') throw new Error(`${noVenv}; CI=true, so this fails instead of skipping`);
          console.warn(`docs-commands: SKIPPING the pip commands of ${doc.file}: ${noVenv}`);
        }
      }
      env = { ...process.env, PATH: [...path, process.env.PATH].join(':'), PIP_NO_CACHE_DIR: '1', PIP_DISABLE_PIP_VERSION_CHECK: '1' };
      const named = [...new Set(doc.steps.flatMap((s) => (s.kind === 'run' ? portsIn(s.command.bare) : s.kind === 'output' ? portsIn(s.command) : [])))];
      ports = new Map(await Promise.all(named.map(async (p) => [p, await freePort()] as [number, number])));
    }, 300_000);

    afterAll(async () => {
      await Promise.all(background.splice(0).map((b) => b.stop()));
    });

    const shell = (command: string, at = cwd) => runShell(withPorts(command, ports), { cwd: at, env, timeoutMs: COMMAND_TIMEOUT_MS });
    const context = (): CheckContext => ({ cwd, doc: doc.text, shell, outside, text: (file) => docs.find((d) => d.file === file)!.text });
    const shown = (r: ShellRun) => `exit ${r.code} after ${r.ms} ms\nstdout:\n${r.stdout.slice(-3000)}\nstderr:\n${r.stderr.slice(-3000)}`;

    for (const step of doc.steps) {
      if (step.kind === 'skip') {
        it.skip(`${step.label} — not run: ${step.reason}`, () => undefined);
        continue;
      }
      it(step.label, async (ctx) => {
        if (noVenv !== undefined && step.kind === 'run' && /^pip\b/.test(step.command.bare)) ctx.skip();
        if (step.kind === 'output') {
          const run = await shell(step.command);
          expect(run.code, shown(run)).toBe(0);
          const lines = run.stdout.split('\n').map((l) => l.trimEnd());
          let at = 0;
          for (const want of step.block.body.map((l) => l.trimEnd()).filter((l) => l.trim() !== '')) {
            const found = lines.indexOf(want, at);
            expect(found, `"${want}" (${doc.file}:${step.block.line}) is not in the output, in order:\n${run.stdout}`).toBeGreaterThanOrEqual(0);
            at = found + 1;
          }
          return;
        }
        const { command } = step;
        if (command.background) {
          background.push(await startBackground(withPorts(command.bare, ports), { cwd, env, timeoutMs: 60_000 }));
          return;
        }
        const run = await shell(command.bare);
        const synopsis = /<[\w|.-]+>|\[--/.test(command.bare) ? '\n(it reads like a synopsis, with <placeholders> or [--options]: make its block ```text)' : '';
        expect(run.code, `${shown(run)}${synopsis}`).toBe(command.exit);
        for (const check of figureChecks.filter((c) => c.doc === doc.file && c.command.test(command.bare))) {
          await check.check(run, context());
        }
      }, COMMAND_TIMEOUT_MS + 60_000);
    }

    for (const figures of extra) {
      it(`${doc.file}: ${figures.what} (\`${figures.command}\`)`, async () => {
        if (!figureRunCache.has(figures.command)) figureRunCache.set(figures.command, shell(figures.command));
        const run = await figureRunCache.get(figures.command)!;
        expect(run.code, shown(run)).toBe(0);
        figures.check(run, context());
      }, COMMAND_TIMEOUT_MS + 60_000);
    }
  });
}
