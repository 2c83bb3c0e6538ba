import { allocationReader, emptyFields, untouchedColumns } from './columns.js';
import { groupId, groupSeed } from './groups.js';
import type { Plan, PlanColumns } from './types.js';

/**
 * The plan file (`json`: JSON.stringify(plan, null, 2)) and the `jsonl` plan as text chunks
 * of about CHUNK characters, written straight from the plan's columns: no allocation object
 * per prompt and no string of the whole file (a 10⁶-prompt plan file is ~230 MB). The bytes
 * are JSON.stringify's (test/plan-golden.test.ts compares them with plans written before).
 * A plan whose `allocations` were read or replaced is written from those objects instead.
 * O(rows).
 */
export const CHUNK = 1 << 20;

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
  const field = (name: string, value: string) => `"${name}"${indent}${value}`;
  let chunk = `${text.slice(0, at)}${key}[${pretty ? '\n' : ''}`;
  const read = allocationReader(columns);
  const row = emptyFields();
  for (let j = 0; j < columns.length; j++) {
    read(j, row);
    chunk +=
      `${j === 0 ? '' : between}${open}${field('prompt_id', JSON.stringify(row.prompt_id))}${sep}${field('n', num(row.n))}${sep}` +
      `${field('max_tokens', json(row.max_tokens))}${sep}${field('expected_tokens', num(row.expected_tokens))}${sep}` +
      `${field('p_mean', num(row.p_mean))}${sep}${field('p_low', num(row.p_low))}${sep}${field('p_high', num(row.p_high))}${sep}` +
      `${field('value', num(row.value))}${row.first_rollout > 0 ? `${sep}${field('first_rollout', String(row.first_rollout))}` : ''}${close}`;
    if (chunk.length >= CHUNK) {
      yield chunk;
      chunk = '';
    }
  }
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
  let chunk = `${header}\n`;
  for (const line of groupLinesOf(plan, columns)) {
    chunk += line;
    if (chunk.length >= CHUNK) {
      yield chunk;
      chunk = '';
    }
  }
  if (chunk !== '') yield chunk;
}

/** Group lines from the columns, each ending in a newline; the fields of planGroups. */
function* groupLinesOf(plan: Plan, columns: PlanColumns): Generator<string> {
  const { step, seed } = plan;
  const n = columns.n;
  for (let j = 0; j < columns.length; j++) {
    if (!(n[j]! > 0)) continue;
    const c = columns.candidates[j]!;
    const first = c.partial_rewards?.length ?? 0;
    const rolloutSeed = (groupSeed(seed, step, c.id) + first) | 0;
    yield `{"group_id":${JSON.stringify(groupId(step, c.id))},"prompt_id":${JSON.stringify(c.id)},"n":${n[j]},` +
      `"max_tokens":${json(c.max_tokens ?? null)},"seed":${rolloutSeed}${first > 0 ? `,"first_rollout":${first}` : ''}}\n`;
  }
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
