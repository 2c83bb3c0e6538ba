/** `postgres://user@host:port/db?schema=name`: the password is never echoed. */
export function redactUrl(url: string): string {
  // user:password@, and a ?password= (or &password=) parameter, which node-postgres takes too.
  return url.replace(/\/\/([^:@/]+):[^@/]*@/, '//$1:***@').replace(/([?&]password=)[^&#]*/gi, '$1***');
}

/** Whether a `--state` value is a PostgreSQL URL (`postgres://` or `postgresql://`), not a SQLite path. */
export function isPostgresUrl(location: string): boolean {
  return /^postgres(ql)?:\/\//i.test(location);
}

/**
 * Why a state location names no state (undefined: it may): an empty path, or a URL but not
 * PostgreSQL's. The service's own `http://` or `https://` (what its clients take) would otherwise
 * be taken for a SQLite file's name: an empty state, or a folder that is not there.
 */
export function notAStateUrl(location: string): string | undefined {
  // SQLite takes '' for a temporary database, deleted at close: everything observed would be lost.
  if (location.trim() === '') return `${JSON.stringify(location)} is an empty path (an unset variable?): give a state file, :memory: or a postgres:// URL`;
  if (!/^[a-z][a-z0-9+.-]*:\/\//i.test(location) || isPostgresUrl(location)) return undefined;
  const service = /^https?:/i.test(location) ? '; an http(s):// URL names the service, for its clients (the Python HttpClient, a trainer\'s ROLLOUT_BUDGET_URL)' : '';
  return `"${redactUrl(location)}" is a URL, and a state is a SQLite file or a postgres:// URL${service}`;
}
