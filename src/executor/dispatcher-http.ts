import type { Agent } from 'undici';
import { lazyRequire } from '../lazy.js';

/** undici (the version Node 20's own fetch bundles), loaded on the first request to a server. */
const undici = lazyRequire<typeof import('undici')>('undici');

let agent: Agent | undefined;

/**
 * The dispatcher of every request to a generation server. Node's fetch (undici's global Agent)
 * ends a request after 300 s without its headers or between two body bytes (`headersTimeout`,
 * `bodyTimeout`, 300e3 by default): below `--timeout-s`'s default of 600, so a request queued
 * behind a full batch (vLLM sends its headers at once and its first chunk when the request is
 * scheduled; SGLang holds the headers until the first chunk) failed at 300 s as a connection
 * error and was sent again at the back of the queue. Here both are off: the executor's own idle
 * timer (`--timeout-s`, time without a byte from the server) decides. One Agent a process, so
 * connections are kept alive across requests as before.
 */
export function generationDispatcher(): Agent {
  return (agent ??= new (undici().Agent)({ headersTimeout: 0, bodyTimeout: 0 }));
}
