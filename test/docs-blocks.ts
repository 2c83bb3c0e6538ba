/**
 * Reads the fenced code blocks of the Markdown docs and the shell commands in them, for
 * test/docs-commands.test.ts. The rules (also in the README, "Documented commands are tested"):
 *
 * - A **commands block** is a fenced block with no language, or `sh`, `bash`, `shell`. Every line
 *   of it is a shell command a reader would type, from the clone's root, in order; `#` starts a
 *   comment; a line ending in `\` continues on the next; a command ending in `&` runs in the
 *   background (a server: the next command waits for its "listening on" line). A command
 *   that should fail says so in a trailing comment: `# exits 2`.
 * - Any other language (`text`, `json`, `ts`, `python`, ...) is not run: synopses, output,
 *   transcripts, trainer flags and code go there.
 * - `<!-- not run: reason -->` as the last line before a commands block skips it, with the reason.
 * - `<!-- output of: command -->` as the last line before a block: the command is run at that
 *   point of the doc, and every non-blank line of the block must appear in its output, in order.
 */
export interface DocBlock {
  readonly file: string;
  /** 1-based line of the opening fence. */
  readonly line: number;
  readonly lang: string;
  /** The block's lines, without the fence's indentation. */
  readonly body: readonly string[];
  /** The reason of a `<!-- not run: reason -->` before the block. */
  readonly notRun?: string;
  /** The command of an `<!-- output of: command -->` before the block. */
  readonly outputOf?: string;
}

export interface DocCommand {
  readonly file: string;
  /** 1-based line where the command starts. */
  readonly line: number;
  /** The command as written (continuation lines joined with their `\` and newline). */
  readonly text: string;
  /** The command without its trailing comment and `&`. */
  readonly bare: string;
  readonly background: boolean;
  /** The exit code a trailing `# exits N` comment gives; 0 otherwise. */
  readonly exit: number;
}

export const COMMAND_LANGS: readonly string[] = ['', 'sh', 'bash', 'shell'];

/** The fenced blocks of a Markdown text, with the annotation comment before each. */
export function blocksOf(file: string, text: string): DocBlock[] {
  const lines = text.split('\n');
  const blocks: DocBlock[] = [];
  let last = '';
  for (let i = 0; i < lines.length; i++) {
    const open = /^(\s*)(`{3,}|~{3,})\s*([\w+-]*)\s*$/.exec(lines[i]!);
    if (open === null) {
      if (lines[i]!.trim() !== '') last = lines[i]!.trim();
      continue;
    }
    const [, indent, fence, lang] = open as unknown as [string, string, string, string];
    const body: string[] = [];
    let j = i + 1;
    for (; j < lines.length; j++) {
      const l = lines[j]!;
      if (l.trim().startsWith(fence) && l.trim().replace(/[`~]/g, '') === '') break;
      body.push(l.startsWith(indent) ? l.slice(indent.length) : l.trimStart());
    }
    if (j === lines.length) throw new Error(`${file}:${i + 1}: code block never closed`);
    const notRun = /^<!--\s*not run:\s*(.*?)\s*-->$/.exec(last)?.[1];
    const outputOf = /^<!--\s*output of:\s*(.*?)\s*-->$/.exec(last)?.[1];
    blocks.push({ file, line: i + 1, lang, body, ...(notRun === undefined ? {} : { notRun }), ...(outputOf === undefined ? {} : { outputOf }) });
    i = j;
    last = '';
  }
  return blocks;
}

/** Where a `#` outside quotes starts a comment (preceded by a blank or at the start), else -1. */
export function commentStart(line: string): number {
  let quote: string | null = null;
  for (let k = 0; k < line.length; k++) {
    const c = line[k]!;
    if (quote !== null) {
      if (c === '\\' && quote === '"') k++;
      else if (c === quote) quote = null;
    } else if (c === '\\') k++;
    else if (c === "'" || c === '"') quote = c;
    else if (c === '#' && (k === 0 || /\s/.test(line[k - 1]!))) return k;
  }
  return -1;
}

/** The commands of a commands block, continuation lines joined. */
export function commandsOf(block: DocBlock): DocCommand[] {
  const out: DocCommand[] = [];
  let text: string[] = [];
  let start = 0;
  block.body.forEach((raw, k) => {
    const line = raw.replace(/\s+$/, '');
    if (text.length === 0) {
      if (line.trim() === '' || line.trim().startsWith('#')) return;
      start = block.line + 1 + k;
    }
    text.push(line);
    if (line.endsWith('\\')) return;
    out.push(command(block.file, start, text.join('\n')));
    text = [];
  });
  if (text.length > 0) throw new Error(`${block.file}:${start}: the command's last line ends in "\\"`);
  return out;
}

function command(file: string, line: number, text: string): DocCommand {
  const joined = text.replace(/\s*\\\n\s*/g, ' ');
  const hash = commentStart(joined);
  const comment = hash < 0 ? '' : joined.slice(hash + 1).trim();
  let bare = (hash < 0 ? joined : joined.slice(0, hash)).trim();
  const background = /(^|[^&])&$/.test(bare);
  if (background) bare = bare.slice(0, -1).trim();
  const exit = /^exits? (\d+)\b/.exec(comment);
  return { file, line, text, bare, background, exit: exit === null ? 0 : Number(exit[1]) };
}

/** Inline code spans (`...`) of a Markdown text outside fenced blocks, with their lines. */
export function inlineSpans(text: string): { line: number; code: string }[] {
  const spans: { line: number; code: string }[] = [];
  let fenced = false;
  text.split('\n').forEach((l, k) => {
    if (/^\s*(`{3,}|~{3,})/.test(l)) fenced = !fenced;
    if (fenced) return;
    for (const m of l.matchAll(/(?<!`)`([^`]+)`(?!`)/g)) spans.push({ line: k + 1, code: m[1]! });
  });
  return spans;
}
