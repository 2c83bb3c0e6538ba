import { InvalidArgumentError } from 'commander';
import { badOption } from '../errors.js';
import { notAStateUrl } from '../store/url.js';

/** Commander argument parsers that reject rather than repair. */
export function intArg(min: number, max = Number.MAX_SAFE_INTEGER): (value: string) => number {
  return (value) => {
    const n = Number(value);
    if (!/^-?\d+$/.test(value.trim()) || !Number.isSafeInteger(n) || n < min || n > max) {
      // An integer past 2^53 − 1 read as "must be an integer ≥ 0": say where the range ends.
      const beyond = /^\d+$/.test(value.trim()) && !Number.isSafeInteger(n) ? ' (at most 2^53 − 1 = 9007199254740991)' : '';
      throw new InvalidArgumentError(max === Number.MAX_SAFE_INTEGER ? `must be an integer ≥ ${min}${beyond}, got "${value}"` : `must be an integer from ${min} to ${max}, got "${value}"`);
    }
    return n;
  };
}

export function numberArg(min: number, max: number): (value: string) => number {
  return (value) => {
    const n = Number(value);
    if (value.trim() === '' || !Number.isFinite(n) || n < min || n > max) {
      throw new InvalidArgumentError(`must be a number in [${min}, ${max}], got "${value}"`);
    }
    return n;
  };
}

/**
 * `--fresh-cap`: 0 (no cap) or a finite number ≥ 1, plan/fresh-cap.ts's isFreshCap, spelled
 * here: a command's start loads no planner module (test/cli-lazy.test.ts).
 */
export function freshCapArg(value: string): number {
  const n = Number(value);
  if (value.trim() === '' || !(n === 0 || (Number.isFinite(n) && n >= 1))) {
    throw new InvalidArgumentError(`must be 0 (no cap) or a number ≥ 1, got "${value}"`);
  }
  return n;
}

/** `--state`: a SQLite file's path or a PostgreSQL URL, as given; another URL is refused (store/url.ts notAStateUrl). */
export function stateArg(value: string): string {
  const reason = notAStateUrl(value);
  if (reason !== undefined) throw new InvalidArgumentError(reason);
  return value;
}

/**
 * A secret sent as `Authorization: Bearer <secret>` (serve's --token, execute's --api-key): the
 * flag's value, else the environment variable's; undefined when neither is set (or, with
 * `emptyEnvIsNone`, the variable is empty: one this project does not own, such as
 * $OPENAI_API_KEY). Printable ASCII without spaces, as a header carries it; the BAD_OPTION
 * names where it came from and never shows it.
 */
export function bearerSecret(given: string | undefined, flag: string, envName: string, emptyEnvIsNone = false, env: NodeJS.ProcessEnv = process.env): string | undefined {
  const fromEnv = env[envName];
  const [secret, from] = given !== undefined ? [given, flag] : [emptyEnvIsNone && fromEnv === '' ? undefined : fromEnv, `$${envName}`];
  if (secret === undefined) return undefined;
  const bad = [...secret].findIndex((c) => c < '!' || c > '~');
  if (secret === '') throw badOption(`${from} is empty: give the secret, or ${given !== undefined ? `leave ${flag} out` : `unset ${envName}`}`);
  if (bad >= 0) throw badOption(`${from} holds a character an HTTP header cannot carry (a space, a control character or non-ASCII) at position ${bad + 1} of ${secret.length}: it must be printable ASCII without spaces`);
  return secret;
}

/**
 * A refused flag value, said once. Commander wraps a parser's message as
 * `option '--decay <rate>' argument '2' is invalid. must be a number in [0, 1], got "2"`, which
 * names the value twice and the flag with its placeholder; this gives
 * `--decay must be a number in [0, 1], got "2"`, and commander's own choice check ("Allowed
 * choices are json, jsonl.") `--format must be one of json, jsonl, got "xml"`. Other messages
 * pass through without commander's "error: " prefix.
 */
export function flagValueMessage(message: string): string {
  const m = /^(?:error: )?option '(--[\w-]+)[^']*' argument '([\s\S]*)' is invalid\. ([\s\S]*)$/.exec(message);
  if (m === null) return message.replace(/^error: /, '');
  const [, flag, value, why] = m as unknown as [string, string, string, string];
  const choices = /^Allowed choices are ([\s\S]*)\.$/.exec(why);
  if (choices !== null) return `${flag} must be one of ${choices[1]}, got ${JSON.stringify(value)}`;
  return /^(must |sets |")/.test(why) ? `${flag} ${why}` : `${flag}: ${why}`;
}
