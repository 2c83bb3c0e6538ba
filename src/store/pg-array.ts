/**
 * A PostgreSQL array literal (`{"a","b",NULL}`) of strings, numbers and nulls, as a query
 * parameter: the text pg's own conversion of an array gives (pg/lib/utils.js arrayString:
 * each element quoted, `\` and `"` escaped, a number as its `toString()`, null as NULL), in
 * about a third of its time. observe sends arrays of 10⁵–10⁶ elements (rollout keys, evidence
 * columns), where pg's conversion took ~0.4 µs an element. O(total length).
 */
export function pgArray(values: readonly (string | number | null | undefined)[]): string {
  let out = '{';
  for (let k = 0; k < values.length; k++) {
    if (k > 0) out += ',';
    const v = values[k];
    if (v === null || v === undefined) out += 'NULL';
    else if (typeof v === 'number') out += `"${v}"`;
    else out += PLAIN.test(v) ? `"${v}"` : `"${v.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`;
  }
  return `${out}}`;
}

/** A string with nothing to escape in an array element. */
const PLAIN = /^[^\\"]*$/;

/**
 * `text` as a dollar-quoted SQL string constant (`$k$...$k$`, taken as it is: no escapes), its
 * tag one that does not occur in `text` or across its end. For a literal inlined in a query with no parameters
 * (store/postgres-apply.ts claimKeys), where pg's escapeLiteral, a character at a time, took
 * ~0.5 s of 10⁶ keys. O(length).
 */
export function dollarQuoted(text: string): string {
  let tag = '$k$';
  // The constant ends at the first tag after the opening one: none in the text, nor across its end.
  for (let k = 0; `${text}${tag}`.indexOf(tag) !== text.length; k++) tag = `$k${k}$`;
  return `${tag}${text}${tag}`;
}
