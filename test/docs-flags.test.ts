// Issue 16 (item 8, and the docs as a whole): what the docs say about commands and flags is
// what the CLI has. Every `rollout-budget <command> ...` the docs write — inline, in a synopsis,
// in a commands block — and every inline `<command> --flag` names a command and flags it has;
// and every flag table (`| flag | default | meaning |`) gives the default `--help` shows; and every
// file the docs name (`src/plan/rounds.ts`, a link, a link's #anchor) is there.
// test/docs-commands.test.ts runs the commands; this checks what is only mentioned.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, normalize } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { blocksOf, inlineSpans } from './docs-blocks.js';
import { cli } from './cli-helpers.js';

const ROOT = join(import.meta.dirname, '..');
const DOCS = ['README.md', ...readdirSync(join(ROOT, 'docs')).filter((f) => f.endsWith('.md')).sort().map((f) => `docs/${f}`)];
const texts = new Map(DOCS.map((f) => [f, readFileSync(join(ROOT, f), 'utf8')]));

/** Each command's flags and their help text (whitespace collapsed), from `<command> --help`. */
const help = new Map<string, Map<string, string>>();

/** The options of a commander help page: flag → its description with "(default: ...)". */
function optionsOf(page: string): Map<string, string> {
  const options = new Map<string, string>();
  let current: string | undefined;
  for (const line of page.split('\n')) {
    const m = /^ {2}(?:-\w, )?(--[\w-]+)(.*)$/.exec(line);
    if (m !== null) {
      current = m[1]!;
      options.set(current, m[2]!.trim());
    } else if (current !== undefined && /^\s{4,}\S/.test(line)) {
      options.set(current, `${options.get(current)!} ${line.trim()}`);
    } else current = undefined;
  }
  return options;
}

beforeAll(async () => {
  const top = await cli(['--help']);
  const names = [...top.stdout.matchAll(/^ {2}([a-z][\w-]*) \[options\]/gm)].map((m) => m[1]!);
  expect(names.length).toBeGreaterThanOrEqual(10);
  for (const name of names) {
    const page = await cli([name, '--help']);
    expect(page.code).toBe(0);
    help.set(name, optionsOf(page.stdout));
  }
});

interface Mention {
  where: string;
  command: string;
  text: string;
}

/** `rollout-budget <command> ...` in every block (with its continuation lines) and inline span, and inline `<command> --flag`. */
function mentions(): Mention[] {
  const out: Mention[] = [];
  for (const [file, text] of texts) {
    for (const block of blocksOf(file, text)) {
      block.body.forEach((line, k) => {
        const m = /^(?:.*\s)?rollout-budget ([a-z][\w-]*)\b/.exec(line);
        if (m === null) return;
        let whole = line;
        for (let j = k + 1; j < block.body.length && (/\\$/.test(block.body[j - 1]!) || /^\s+\[/.test(block.body[j]!)); j++) whole += ` ${block.body[j]!}`;
        out.push({ where: `${file}:${block.line + 1 + k}`, command: m[1]!, text: whole.slice(whole.indexOf(m[0]!.trimStart())).replace(/\s#.*$/, '') });
      });
    }
    for (const span of inlineSpans(text)) {
      const m = /^(?:rollout-budget )?([a-z][\w-]*)(?: |$)/.exec(span.code);
      if (m === null || !help.has(m[1]!)) continue;
      if (!span.code.startsWith('rollout-budget ') && !/ --[a-z]/.test(span.code)) continue;
      out.push({ where: `${file}:${span.line}`, command: m[1]!, text: span.code });
    }
  }
  return out;
}

describe('what the docs say about the CLI', () => {
  it('every command and flag the docs name exists', () => {
    const found = mentions();
    // Counted so the test fails if the docs' mentions are silently not found.
    expect(found.length).toBeGreaterThanOrEqual(40);
    const wrong: string[] = [];
    for (const m of found) {
      const flags = help.get(m.command);
      if (flags === undefined) {
        wrong.push(`${m.where}: "rollout-budget ${m.command}" is not a command`);
        continue;
      }
      for (const [flag] of m.text.matchAll(/(?<![\w-])--[a-z][\w-]*/g)) {
        if (!flags.has(flag)) wrong.push(`${m.where}: ${m.command} has no ${flag} (in \`${m.text.slice(0, 80)}\`)`);
      }
    }
    expect(wrong).toEqual([]);
  });

  it('every flag table gives the default --help shows, --help shows every default, and every flag of --help has a row (plan, serve, ...)', () => {
    let checked = 0;
    const wrong: string[] = [];
    for (const [file, text] of texts) {
      const lines = text.split('\n');
      lines.forEach((line, k) => {
        if (!/^\| flag \| default \| meaning \|/.test(line)) return;
        const above = lines.slice(0, k).reverse().find((l) => /^rollout-budget [a-z]/.test(l));
        const command = /^rollout-budget ([a-z][\w-]*)/.exec(above ?? '')?.[1];
        if (command === undefined || !help.has(command)) {
          wrong.push(`${file}:${k + 1}: a flag table under no synopsis of a command`);
          return;
        }
        const rows = new Set<string>();
        for (let j = k + 2; j < lines.length && lines[j]!.startsWith('|'); j++) {
          const [flagCell, defaultCell] = lines[j]!.split('|').slice(1, 3).map((c) => c.trim());
          const flags = [...flagCell!.matchAll(/`(--[\w-]+)`/g)].map((m) => m[1]!);
          for (const flag of flags) rows.add(flag);
          const defaults = flags.length > 1 ? defaultCell!.split(/,\s*/) : [defaultCell!];
          flags.forEach((flag, i) => {
            const shown = help.get(command)!.get(flag);
            const want = (defaults[i] ?? '').replace(/`/g, '').trim().split(/\s/)[0]!.replace(/[,"]/g, '');
            if (shown === undefined) wrong.push(`${file}:${j + 1}: ${command} has no ${flag}`);
            else if (['required', '—', 'off', 'none', ''].includes(want)) return;
            else if (!new RegExp(`default: [^)]*${want.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`).test(shown)) {
              wrong.push(`${file}:${j + 1}: ${command} ${flag}: the table says ${want}, --help says "${shown}"`);
            }
            checked++;
          });
        }
        // And the other way: every flag of --help has a row (plan's --model had none).
        for (const flag of help.get(command)!.keys()) {
          if (flag !== '--help' && !rows.has(flag)) wrong.push(`${file}:${k + 1}: the ${command} table has no row for ${flag}`);
        }
      });
    }
    expect(checked).toBeGreaterThanOrEqual(20);
    expect(wrong).toEqual([]);
  });

  it('every file and anchor the docs name exists', () => {
    /** GitHub's anchors: the heading in lower case, punctuation dropped, spaces as hyphens. */
    const anchors = (file: string) => new Set([...readFileSync(join(ROOT, file), 'utf8').matchAll(/^#{1,6}\s+(.*)$/gm)]
      .map((m) => m[1]!.trim().toLowerCase().replace(/[^\p{L}\p{N}_\- ]/gu, '').replace(/ /g, '-')));
    let checked = 0;
    const wrong: string[] = [];
    for (const [file, text] of texts) {
      for (const span of inlineSpans(text)) {
        const m = /^((?:src|test|python|scripts|fixtures|schemas|docs|bin|\.ci)\/[^\s<>*:]+?)[/.,]?$/.exec(span.code);
        if (m === null) continue;
        checked++;
        if (!existsSync(join(ROOT, m[1]!))) wrong.push(`${file}:${span.line}: \`${span.code}\` does not exist`);
      }
      for (const [, target, anchor] of text.matchAll(/\]\(([^)#\s]*)(?:#([^)\s]+))?\)/g)) {
        if (/^[a-z]+:/.test(target!)) continue;
        const to = target === '' ? file : normalize(join(dirname(file), target!));
        checked++;
        if (!existsSync(join(ROOT, to))) wrong.push(`${file}: the link to ${target} goes nowhere`);
        else if (anchor !== undefined && to.endsWith('.md') && !anchors(to).has(anchor)) wrong.push(`${file}: ${to} has no heading for #${anchor}`);
      }
    }
    expect(checked).toBeGreaterThanOrEqual(60);
    expect(wrong).toEqual([]);
  });
});
