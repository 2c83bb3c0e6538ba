import { badOption, quote } from '../errors.js';

/**
 * Endpoint base URLs. Users paste what their server prints or what OpenAI clients take:
 * `http://host:8000`, `http://host:8000/v1` (vLLM's docs and every OpenAI client's base_url),
 * either with a trailing slash, or a proxy path before `/v1` (`https://gw.example/vllm/v1`).
 * All of them are cut to the part before `/v1`, and requests go to `<base>/v1/completions` etc.
 * A URL that cannot be sent (no http(s) scheme, no host, a port out of range or 0, a query or fragment)
 * is refused when the command starts, with one message, so it is never retried.
 */
export function normalizeEndpoint(raw: string): string {
  const value = raw.trim();
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw badOption(`--endpoint ${quote(raw)} is not a URL; expected http://host:port or http://host:port/v1`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw badOption(`--endpoint ${quote(raw)} must use http or https, got ${quote(url.protocol.replace(/:$/, ''))}`);
  }
  if (url.hostname === '') throw badOption(`--endpoint ${quote(raw)} has no host; expected http://host:port`);
  if (url.port === '0') throw badOption(`--endpoint ${quote(raw)}: port 0 cannot be connected to; give the port the server listens on`);
  if (url.username !== '' || url.password !== '') throw badOption(`--endpoint ${quote(raw)}: credentials in the URL are not sent; remove "user:password@"`);
  if (url.search !== '' || url.hash !== '') throw badOption(`--endpoint ${quote(raw)} must not have a query or fragment, got ${quote(url.search + url.hash)}`);
  let path = url.pathname.replace(/\/+$/, '');
  // An API path pasted as the base (`.../v1/completions`): every request went to
  // `.../v1/completions/v1/completions`, a 404 after a detection note that hid it.
  const api = /\/v1\/(chat\/completions|completions|models)$/.exec(path);
  if (api !== null) {
    throw badOption(`--endpoint ${quote(raw)} ends with an API path (${quote(api[0])}): give the server's base URL, ${quote(`${url.protocol}//${url.host}${path.slice(0, api.index)}`)}; the executor adds /v1/completions or /v1/chat/completions itself`);
  }
  if (path.endsWith('/v1')) path = path.slice(0, -3);
  return `${url.protocol}//${url.host}${path}`;
}

/** The URL of an API path (`/v1/completions`, `/v1/models`) under a normalised base. */
export function endpointUrl(base: string, path: string): string {
  return `${base}${path}`;
}
