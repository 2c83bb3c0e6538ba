/** The first 16 bytes of every SQLite database file. */
export const SQLITE_MAGIC = 'SQLite format 3\x00';

/**
 * Binary formats people pass where text goes (a prompts, results or log file; a request body),
 * told by the bytes they start with, so the error says what the file is and what to do rather
 * than "not valid UTF-8" or "malformed JSON". verl's datasets are Parquet; logs and dumps are
 * often compressed; a state file is SQLite.
 */
const KINDS: readonly { readonly magic: string; readonly what: string; readonly todo: string }[] = [
  { magic: '\x1f\x8b', what: 'gzip-compressed data', todo: 'decompress it first (gunzip -k, or zcat into a pipe)' },
  { magic: '\x28\xb5\x2f\xfd', what: 'zstd-compressed data', todo: 'decompress it first (zstd -d)' },
  { magic: '\xfd7zXZ\x00', what: 'xz-compressed data', todo: 'decompress it first (xz -dk)' },
  { magic: 'BZh', what: 'bzip2-compressed data', todo: 'decompress it first (bunzip2 -k)' },
  { magic: 'PK\x03\x04', what: 'a zip archive', todo: 'unzip it first' },
  {
    magic: 'PAR1',
    what: 'a Parquet file (as verl\'s datasets are)',
    todo: 'write its rows as JSONL first, one JSON object a line (a verl dataset as prompts, with the ids the verl integration gives them: python -m rollout_budget.dataset <file>.parquet --out prompts.jsonl, from the Python package in python/; other rows, with pandas: pd.read_parquet(path).to_json(out, orient="records", lines=True))',
  },
  { magic: 'ARROW1', what: 'an Arrow file', todo: 'write its rows as JSONL first, one JSON object a line' },
  { magic: '\xff\xfe', what: 'UTF-16 text (little-endian, as Windows\' "Unicode")', todo: 'save it as UTF-8 (iconv -f UTF-16 -t UTF-8)' },
  { magic: '\xfe\xff', what: 'UTF-16 text (big-endian)', todo: 'save it as UTF-8 (iconv -f UTF-16 -t UTF-8)' },
  { magic: SQLITE_MAGIC, what: 'a SQLite database (a state file?)', todo: 'a state goes to --state, and this place takes a text file' },
];

/**
 * What the text or bytes at the start of an input are, with what to do, when they begin like
 * one of the formats above (`this is gzip-compressed data, not UTF-8 text: decompress it
 * first (...)`); undefined otherwise. Bytes are compared as Latin-1 characters.
 */
export function binaryKind(start: Uint8Array | string): string | undefined {
  for (const kind of KINDS) {
    if (startsWith(start, kind.magic)) return `this is ${kind.what}, not UTF-8 text: ${kind.todo}`;
  }
  return undefined;
}

/** Whether these bytes begin a SQLite database. */
export function isSqliteStart(start: Uint8Array | string): boolean {
  return startsWith(start, SQLITE_MAGIC);
}

function startsWith(start: Uint8Array | string, magic: string): boolean {
  if (start.length < magic.length) return false;
  for (let i = 0; i < magic.length; i++) {
    const c = typeof start === 'string' ? start.charCodeAt(i) : start[i]!;
    if (c !== magic.charCodeAt(i)) return false;
  }
  return true;
}
