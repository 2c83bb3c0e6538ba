/** `postgres://user@host:port/db?schema=name`: the password is never echoed. */
export function redactUrl(url: string): string {
  return url.replace(/\/\/([^:@/]+):[^@/]*@/, '//$1:***@');
}

/** Whether a `--state` value is a PostgreSQL URL (`postgres://` or `postgresql://`), not a SQLite path. */
export function isPostgresUrl(location: string): boolean {
  return /^postgres(ql)?:\/\//i.test(location);
}
