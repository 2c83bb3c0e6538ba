import { createHash, timingSafeEqual } from 'node:crypto';
import { isIP } from 'node:net';
import { hostname as machineName } from 'node:os';

/**
 * Who may talk to the HTTP service. A web page the user visits can send requests to
 * localhost (a form or `fetch(..., {mode: 'no-cors'})` with a "simple" content type), and
 * through DNS rebinding even read the answers. So before a request is read:
 * - the Host header must name this service: an IP address, `localhost`, the listen address,
 *   this machine's name, or one of `allowedHosts` (a rebinding page's Host is its own domain);
 * - an Origin header, which browsers send, must be this service's own origin;
 * - with a token, `Authorization: Bearer <token>` is required (GET /healthz excepted, for
 *   liveness probes);
 * - a POST must say `Content-Type: application/json` (observe: or an NDJSON type), which
 *   a browser cannot send cross-origin without a CORS preflight that this service never
 *   approves (it sends no Access-Control-* headers).
 */
export interface GuardOptions {
  /** The address the service listens on (`--host`). */
  readonly listenHost: string;
  /** Bearer token; undefined: no authentication (loopback only, enforced by `serve`). */
  readonly token?: string;
  /** More Host names to accept (`--allowed-hosts`); `*` accepts any. */
  readonly allowedHosts?: readonly string[];
}

export interface Refusal {
  readonly status: number;
  readonly code: string;
  readonly message: string;
  readonly headers?: Record<string, string>;
}

export interface RequestHead {
  readonly method: string;
  readonly path: string;
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  /** `1.1` or `1.0` (absent: not checked). */
  readonly httpVersion?: string;
  /** How many Host header lines came (Node's `headers` keeps the first only; absent: not checked). */
  readonly hostLines?: number;
}

const JSON_TYPES = ['application/json'];
const NDJSON_TYPES = ['application/x-ndjson', 'application/ndjson', 'application/jsonl', 'application/jsonlines'];

/** True for an address only this machine can reach: 127.0.0.0/8, ::1, localhost. */
export function isLoopback(host: string): boolean {
  const h = host.replace(/^\[(.*)\]$/, '$1').toLowerCase();
  if (h === 'localhost' || h.endsWith('.localhost')) return true;
  if (isIP(h) === 4) return h.startsWith('127.');
  return h === '::1' || h === '0:0:0:0:0:0:0:1' || /^::ffff:127\./.test(h);
}

/** The host name of a Host header value (`name:port`, `[v6]:port`), lower case, without a final dot. */
function hostName(value: string): string {
  const v = value.trim().toLowerCase();
  const name = v.startsWith('[') ? v.slice(0, v.indexOf(']') + 1) : v.replace(/:\d*$/, '');
  return name.replace(/\.$/, '');
}

function header(head: RequestHead, name: string): string | undefined {
  const v = head.headers[name];
  return Array.isArray(v) ? v.join(', ') : v;
}

const digest = (text: string) => createHash('sha256').update(text).digest();

export class RequestGuard {
  private readonly names: Set<string>;
  private readonly anyHost: boolean;
  private readonly token: Buffer | undefined;

  constructor(options: GuardOptions) {
    const allowed = (options.allowedHosts ?? []).map((h) => h.trim().toLowerCase()).filter((h) => h !== '');
    this.anyHost = allowed.includes('*');
    const machine = machineName().toLowerCase();
    this.names = new Set([hostName(options.listenHost), machine, machine.split('.')[0]!, ...allowed]);
    this.token = options.token === undefined ? undefined : digest(options.token);
  }

  /** Why this request is refused, or undefined to serve it. Reads headers only. O(header size). */
  check(head: RequestHead): Refusal | undefined {
    const host = header(head, 'host');
    // RFC 9112 §3.2: a server answers 400 to an HTTP/1.1 request without Host (Node's own 400 had no body).
    if (host === undefined && head.httpVersion === '1.1') {
      return { status: 400, code: 'BAD_REQUEST', message: 'an HTTP/1.1 request needs a Host header (RFC 9112 §3.2): send "Host: 127.0.0.1:<port>", or the name you reach the service by' };
    }
    // The same section: more than one Host line is a 400 too (Node kept the first and served it).
    if ((head.hostLines ?? 0) > 1) {
      return { status: 400, code: 'BAD_REQUEST', message: `a request has one Host header (RFC 9112 §3.2), got ${head.hostLines}` };
    }
    if (!this.anyHost && host !== undefined && !this.hostAllowed(hostName(host))) {
      return {
        status: 403,
        code: 'FORBIDDEN_HOST',
        message: `Host ${JSON.stringify(host)} is not this service's name (DNS rebinding guard); use an IP address or localhost, or start serve with --allowed-hosts ${hostName(host)}`,
      };
    }
    const origin = header(head, 'origin');
    if (origin !== undefined && !this.sameOrigin(origin, host)) {
      return { status: 403, code: 'FORBIDDEN_ORIGIN', message: `requests from web pages are refused: Origin ${JSON.stringify(origin)} is not this service` };
    }
    const path = head.path.split('?')[0];
    if (this.token !== undefined && !(head.method === 'GET' && path === '/healthz')) {
      const auth = header(head, 'authorization') ?? '';
      const m = /^Bearer +(\S+) *$/i.exec(auth);
      if (m === null || !timingSafeEqual(digest(m[1]!), this.token)) {
        return {
          status: 401,
          code: 'UNAUTHORIZED',
          message: m === null ? 'this service needs "Authorization: Bearer <token>" (serve --token or ROLLOUT_BUDGET_TOKEN)' : 'the bearer token is wrong',
          headers: { 'www-authenticate': 'Bearer realm="rollout-budget"' },
        };
      }
    }
    if (head.method === 'POST') {
      const type = header(head, 'content-type') ?? '';
      const [media = '', ...params] = type.split(';').map((p) => p.trim().toLowerCase());
      const accepted = path === '/v1/observe' ? [...JSON_TYPES, ...NDJSON_TYPES] : JSON_TYPES;
      const charset = params.find((p) => p.startsWith('charset='))?.slice('charset='.length).replace(/"/g, '');
      if (!accepted.includes(media) || (charset !== undefined && charset !== 'utf-8' && charset !== 'utf8')) {
        return {
          status: 415,
          code: 'UNSUPPORTED_MEDIA_TYPE',
          message: `POST ${path} needs "Content-Type: ${accepted.join('" or "')}" (UTF-8), got ${JSON.stringify(type)}`,
        };
      }
      // A compressed body (RFC 9110 §8.4) would be read as text and refused as bytes that are
      // not UTF-8: say instead that only an uncompressed one is taken (§15.5.16: 415).
      const encoding = (header(head, 'content-encoding') ?? '').trim().toLowerCase();
      if (encoding !== '' && encoding !== 'identity') {
        return {
          status: 415,
          code: 'UNSUPPORTED_MEDIA_TYPE',
          message: `POST ${path} takes an uncompressed body (no Content-Encoding), got Content-Encoding ${JSON.stringify(encoding)}`,
          headers: { 'accept-encoding': 'identity' },
        };
      }
    }
    return undefined;
  }

  private hostAllowed(name: string): boolean {
    if (name.startsWith('[') || isIP(name) !== 0) return true; // an address: no DNS name to rebind
    return name === 'localhost' || name.endsWith('.localhost') || this.names.has(name);
  }

  private sameOrigin(origin: string, host: string | undefined): boolean {
    if (host === undefined) return false;
    try {
      const u = new URL(origin);
      return u.protocol === 'http:' && u.host === new URL(`http://${host}`).host;
    } catch {
      return false;
    }
  }
}
