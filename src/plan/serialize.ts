import { ByteChunk, chunkText, joinChunks, type PlanChunk } from './byte-chunk.js';
import { allocationReader, emptyFields, posteriorReader, untouchedColumns } from './columns.js';
import { groupId, groupSeeds } from './groups.js';
import { cacheBits, CHUNK, release, rowTexts, TextCache } from './text-cache.js';
import type { Plan } from './types.js';

/**
 * The plan file (`json`: JSON.stringify(plan, null, 2)) and the `jsonl` plan as chunks of
 * about CHUNK bytes of UTF-8, written straight from the plan's columns into one reused buffer
 * (plan/byte-chunk.ts): no allocation object nor string per prompt, and no string of the
 * whole file (a 10⁶-prompt plan file is ~230-260 MB). The bytes are JSON.stringify's
 * (test/plan-golden.test.ts compares them with plans written before). A plan whose
 * `allocations` were read or replaced is written from those objects instead (one string).
 * Runs of fields whose numbers repeat are formatted once (plan/text-cache.ts) and copied; a
 * run's first text is written straight into the chunk and kept from there. The run from p_mean
 * to the value's key is kept by the row's (α, β), so a row whose text is kept computes no
 * interval; the value's text, kept by the value, runs on to the next row's prompt_id.
 * A chunk ends after a row (or, in jsonl, after a line's ASCII digits), so it holds whole
 * characters. O(rows).
 */
/** Marks the allocations' place in the header's JSON text. */
const MARK = '\u0000allocations';

/**
 * The plan's own enumerable fields in their order, `allocations` replaced by `replacement`
 * (or left out when it is undefined), without reading the allocations.
 */
function shellOf(plan: Plan, replacement: unknown): Record<string, unknown> {
  const shell: Record<string, unknown> = {};
  for (const key of Object.keys(plan)) {
    if (key === 'allocations') {
      if (replacement !== undefined) shell[key] = replacement;
    } else shell[key] = (plan as unknown as Record<string, unknown>)[key];
  }
  return shell;
}

/** The `json` plan file, `JSON.stringify(plan, null, 2)` and a newline, in chunks. */
export function* planJsonChunks(plan: Plan): Generator<string> {
  for (const chunk of jsonChunks(plan, true)) yield chunkText(chunk);
}

/** planJsonChunks as UTF-8 bytes (each chunk valid until the next is asked for): for writing a file. */
export function planJsonBytes(plan: Plan): Generator<PlanChunk> {
  return jsonChunks(plan, true);
}

/** `JSON.stringify(plan)` (compact, no newline: the service's answer), made from the columns. */
export function planJsonCompact(plan: Plan): string {
  return joinChunks(jsonChunks(plan, false));
}

function* jsonChunks(plan: Plan, pretty: boolean): Generator<PlanChunk> {
  const columns = untouchedColumns(plan);
  if (columns === undefined) {
    yield pretty ? `${JSON.stringify(plan, null, 2)}\n` : JSON.stringify(plan);
    return;
  }
  const text = pretty ? JSON.stringify(shellOf(plan, MARK), null, 2) : JSON.stringify(shellOf(plan, MARK));
  const mark = `"allocations":${pretty ? ' ' : ''}${JSON.stringify(MARK)}`;
  const at = text.indexOf(mark);
  const end = pretty ? '\n' : '';
  const key = pretty ? '"allocations": ' : '"allocations":';
  if (columns.length === 0) {
    yield `${text.slice(0, at)}${key}[]${text.slice(at + mark.length)}${end}`;
    return;
  }
  // Pretty: each field on its own line, at the depth JSON.stringify(plan, null, 2) puts it.
  const [open, sep, close, between, indent] = pretty
    ? ['    {\n      ', ',\n      ', '\n    }', ',\n', ': ']
    : ['{', ',', '}', ',', ':'];
  const name = (field: string) => `${sep}"${field}"${indent}`;
  const [nKey, maxKey, tokensKey, meanKey, lowKey, highKey, valueKey] =
    ['n', 'max_tokens', 'expected_tokens', 'p_mean', 'p_low', 'p_high', 'value'].map(name);
  // Runs of fields whose numbers repeat across rows (and plans), each formatted once per
  // distinct numbers; the set is the thread's (plan/text-cache.ts), released when done.
  const texts = rowTexts(pretty, columns.length, columns.interval);
  try {
    const { chunk, counts, posteriors, values } = texts;
    // The layout's own texts, pinned in the arena and copied by index: between two rows,
    // before first_rollout's number, and the field names before each cached run's numbers.
    const next = `${close}${between}${open}"prompt_id"${indent}`;
    const rolloutKey = name('first_rollout');
    const keys = [next, rolloutKey, nKey, maxKey, tokensKey, meanKey, lowKey, highKey, valueKey];
    const constants = (texts.constants ??= Int32Array.from(keys, (k) => chunk.keep(k!, true)));
    const constant = (k: number) => chunk.copy(constants[k]!, keys[k]!.length);
    chunk.text(`${text.slice(0, at)}${key}[${pretty ? '\n' : ''}${open}"prompt_id"${indent}`);
    // The posterior's fields are read only where their text is not kept.
    const read = allocationReader(columns, false);
    const posterior = posteriorReader(columns);
    const { alpha, beta } = columns;
    const row = emptyFields();
    const last = columns.length - 1;
    // Whether the last row's text ended with `next` (the text between two rows, after its value).
    let joined = false;
    for (let j = 0; j <= last; j++) {
      read(j, row);
      if (j > 0 && !joined) constant(0);
      chunk.quoted(row.prompt_id);
      // A text not cached is written straight into the chunk, then kept from there.
      const max = row.max_tokens;
      if (!counts.reuse(row.n, max ?? 0, max === null ? 1 : 0)) {
        constant(2);
        chunk.num(row.n);
        constant(3);
        if (max === null) chunk.text('null');
        else chunk.num(max);
        constant(4);
        counts.keepWritten();
      }
      chunk.num(row.expected_tokens);
      // p_mean, p_low and p_high are a function of (α, β) at the set's interval, kept by them
      // (a Thompson plan's values differ where its posteriors repeat). The value's text ends
      // with the text between this row and the next: a row whose value is not its last field,
      // or the last row, takes that text back off.
      const a = alpha[j]!;
      const b = beta[j]!;
      if (!posteriors.reuse(a, b, 0)) {
        posterior(a, b, row);
        constant(5);
        chunk.num(row.p_mean);
        constant(6);
        chunk.num(row.p_low);
        constant(7);
        chunk.num(row.p_high);
        constant(8);
        posteriors.keepWritten();
      }
      if (!values.reuse(row.value, 0, 0)) {
        chunk.num(row.value);
        constant(0);
        values.keepWritten();
      }
      joined = j < last && row.first_rollout === 0;
      if (!joined) chunk.length -= next.length;
      if (row.first_rollout > 0) {
        constant(1);
        chunk.num(row.first_rollout);
      }
      if (chunk.length >= CHUNK) yield chunk.take();
    }
    chunk.text(`${close}${pretty ? '\n  ' : ''}]${text.slice(at + mark.length)}${end}`);
    yield chunk.take();
  } finally {
    release(texts);
  }
}

/**
 * The `jsonl` plan: a header line (`{"type": "header", ...the plan but its allocations}`),
 * then one line per group (plan/exports.ts planGroups), in chunks (bytes valid until the
 * next chunk is asked for).
 */
export function* planJsonlChunks(plan: Plan, groupLines: (plan: Plan) => string[]): Generator<PlanChunk> {
  const header = JSON.stringify({ type: 'header', ...shellOf(plan, undefined) });
  const columns = untouchedColumns(plan);
  if (columns === undefined) {
    yield `${[header, ...groupLines(plan)].join('\n')}\n`;
    return;
  }
  // Lines from the columns: the fields of planGroups. The group id's JSON is that of
  // "<step>/" (no character to escape) without its closing quote, then the prompt id's JSON
  // without its opening one.
  const { step, seed } = plan;
  const seedOf = groupSeeds(seed, step);
  const n = columns.n;
  const bits = cacheBits(columns.length);
  const chunk = new ByteChunk(CHUNK + 1024, 1 << 12, 64 << bits);
  // From `,"n":` to `"seed":`, kept by (n, max_tokens) as the json writer keeps its runs.
  const counts = new TextCache(bits, chunk);
  // The prompt id's JSON after `"prompt_id":` is the group id's tail written just before it,
  // with the opening quote: written again from those bytes. A line's end and the next line's
  // start are one text.
  const head = `{"group_id":${JSON.stringify(groupId(step, '')).slice(0, -1)}`;
  const texts = [head, `}\n${head}`, ',"prompt_id":"', ',"n":', ',"max_tokens":', ',"seed":', ',"first_rollout":'];
  const at = texts.map((t) => chunk.keep(t, true));
  const [firstHead, nextHead, idKey, nKey, maxKey, seedKey, rolloutKey] = at;
  const [firstLength, nextLength, idLength, nLength, maxLength, seedLength, rolloutLength] = texts.map((t) => t.length);
  chunk.text(`${header}\n`);
  let lines = 0;
  for (let j = 0; j < columns.length; j++) {
    if (!(n[j]! > 0)) continue;
    const c = columns.candidates[j]!;
    const first = c.partial_rewards?.length ?? 0;
    if (lines++ === 0) chunk.copy(firstHead!, firstLength!);
    else chunk.copy(nextHead!, nextLength!);
    const id = chunk.length;
    chunk.quoted(c.id, 1);
    const idBytes = chunk.length - id;
    chunk.copy(idKey!, idLength!);
    chunk.again(id, idBytes);
    const max = c.max_tokens ?? null;
    const limited = typeof max === 'number';
    if (!counts.reuse(n[j]!, limited ? max : 0, limited ? 0 : 1)) {
      chunk.copy(nKey!, nLength!);
      chunk.num(n[j]!);
      chunk.copy(maxKey!, maxLength!);
      if (limited) chunk.num(max);
      else chunk.text(JSON.stringify(max));
      chunk.copy(seedKey!, seedLength!);
      counts.keepWritten();
    }
    chunk.num((seedOf(c.id) + first) | 0);
    if (first > 0) {
      chunk.copy(rolloutKey!, rolloutLength!);
      chunk.num(first);
    }
    if (chunk.length >= CHUNK) yield chunk.take();
  }
  if (lines > 0) chunk.text('}\n');
  if (chunk.length > 0) yield chunk.take();
}

/** Groups (n > 0) whose max_tokens is null, from the columns when they are still the plan's. */
export function countWithoutLimit(plan: Plan): number {
  const columns = untouchedColumns(plan);
  let k = 0;
  if (columns === undefined) {
    for (const a of plan.allocations) if (a.n > 0 && a.max_tokens === null) k++;
    return k;
  }
  for (let j = 0; j < columns.length; j++) if (columns.n[j]! > 0 && (columns.candidates[j]!.max_tokens ?? null) === null) k++;
  return k;
}
