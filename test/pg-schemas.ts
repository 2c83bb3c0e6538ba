/**
 * The PostgreSQL schemas `freshPgUrl` named in this test file, dropped after its last test
 * (test/setup/temp-check.ts), so a run leaves nothing in the test database: a developer's
 * `RB_PG_URL` may point at a database that outlives the run. Keyed by the server's URL.
 */
const named = new Map<string, Set<string>>();

export function noteSchema(base: string, schema: string): void {
  const schemas = named.get(base) ?? new Set<string>();
  schemas.add(schema);
  named.set(base, schemas);
}

/** Drops every schema noted here (those never made too: IF EXISTS). Loads `pg` only when there are any. */
export async function dropNotedSchemas(): Promise<void> {
  if (named.size === 0) return;
  const { default: pg } = await import('pg');
  for (const [base, schemas] of named) {
    const client = new pg.Client({ connectionString: base });
    await client.connect();
    try {
      for (const schema of schemas) await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    } finally {
      await client.end();
    }
  }
  named.clear();
}
