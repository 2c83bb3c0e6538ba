/** `postgres://user@host:port/db?schema=name`: the password is never echoed. */
export function redactUrl(url: string): string {
  return url.replace(/\/\/([^:@/]+):[^@/]*@/, '//$1:***@');
}
