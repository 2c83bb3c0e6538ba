import { allocationReader, emptyFields, untouchedColumns } from './columns.js';
import { groupId, groupSeed } from './groups.js';
import { rowTexts } from './text-cache.js';
import type { Plan, PlanColumns } from './types.js';

/**
 * The plan file (`json`: JSON.stringify(plan, null, 2)) and the `jsonl` plan as text chunks
 * of about CHUNK characters, written straight from the plan's columns: no allocation object
 * per prompt and no string of the whole file (a 10⁶-prompt plan file is ~230 MB). The bytes
 * are JSON.stringify's (test/plan-golden.test.ts compares them with plans written before).
 * A plan whose `allocations` were read or replaced is written from those objects instead.
 * Runs of fields whose numbers repeat are formatted once (plan/text-cache.ts), and chunks
 * stay small (64K characters: a short rope is flattened and encoded cheaply when written).
 * O(rows).
 */
export const CHUNK = 1 << 16;

/** A number as JSON.stringify writes it (non-finite: null). */
const num = (x: number) => (Number.isFinite(x) ? String(x) : 'null');

/** A value as JSON.stringify writes it, with the common number case first. */
const json = (v: unknown) => (typeof v === 'number' ? num(v) : JSON.stringify(v));

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
export function planJsonChunks(plan: Plan): Generator<string> {
  return jsonChunks(plan, true);
}

/** `JSON.stringify(plan)` (compact, no newline: the service's answer), made from the columns. */
export function planJsonCompact(plan: Plan): string {
  return [...jsonChunks(plan, false)].join('');
}

function* jsonChunks(plan: Plan, pretty: boolean): Generator<string> {
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
  const [nKey, maxKey, tokensKey, meanKey, lowKey, highKey, valueKey, rolloutKey] =
    ['n', 'max_tokens', 'expected_tokens', 'p_mean', 'p_low', 'p_high', 'value', 'first_rollout'].map(name);
  const next = `${close}${between}${open}"prompt_id"${indent}`;
  // Runs of fields whose numbers repeat across rows (and plans), each formatted once per distinct numbers.
  const { counts, posteriors, values } = rowTexts(pretty, columns.length);
  let chunk = `${text.slice(0, at)}${key}[${pretty ? '\n' : ''}${open}"prompt_id"${indent}`;
  const read = allocationReader(columns);
  const row = emptyFields();
  for (let j = 0; j < columns.length; j++) {
    read(j, row);
    const max = row.max_tokens;
    const m = counts.get(row.n, max ?? 0, max === null ? 1 : 0) ?? counts.put(`${nKey}${num(row.n)}${maxKey}${json(max)}${tokensKey}`);
    const p = posteriors.get(row.p_mean, row.p_low, row.p_high) ??
      posteriors.put(`${meanKey}${num(row.p_mean)}${lowKey}${num(row.p_low)}${highKey}${num(row.p_high)}${valueKey}`);
    const v = values.get(row.value, 0, 0) ?? values.put(num(row.value));
    chunk += `${j === 0 ? '' : next}${JSON.stringify(row.prompt_id)}${m}${num(row.expected_tokens)}${p}${v}`;
    if (row.first_rollout > 0) chunk += `${rolloutKey}${num(row.first_rollout)}`;
    if (chunk.length >= CHUNK) {
      yield chunk;
      chunk = '';
    }
  }
  chunk += close;
  yield `${chunk}${pretty ? '\n  ' : ''}]${text.slice(at + mark.length)}${end}`;
}

/**
 * The `jsonl` plan: a header line (`{"type": "header", ...the plan but its allocations}`),
 * then one line per group (plan/exports.ts planGroups), in chunks.
 */
export function* planJsonlChunks(plan: Plan, groupLines: (plan: Plan) => string[]): Generator<string> {
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
  const n = columns.n;
  const groupHead = `{"group_id":${JSON.stringify(groupId(step, '')).slice(0, -1)}`;
  let chunk = `${header}\n`;
  for (let j = 0; j < columns.length; j++) {
    if (!(n[j]! > 0)) continue;
    const c = columns.candidates[j]!;
    const first = c.partial_rewards?.length ?? 0;
    const id = JSON.stringify(c.id);
    chunk += `${groupHead}${id.slice(1)},"prompt_id":${id},"n":${n[j]},"max_tokens":${json(c.max_tokens ?? null)},` +
      `"seed":${(groupSeed(seed, step, c.id) + first) | 0}${first > 0 ? `,"first_rollout":${first}` : ''}}\n`;
    if (chunk.length >= CHUNK) {
      yield chunk;
      chunk = '';
    }
  }
  if (chunk !== '') yield chunk;
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
