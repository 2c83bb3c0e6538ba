import type Database from 'better-sqlite3';

/**
 * A reader of a SQLite state's last observed step (`meta.last_step`, stored as text), its
 * statement prepared once on `db`: the number, or null before the first observe.
 */
export function lastStepReader(db: Database.Database): () => number | null {
  const read = db.prepare("SELECT value FROM meta WHERE key = 'last_step'").pluck();
  return () => {
    const value = read.get() as string | undefined;
    return value === undefined ? null : Number(value);
  };
}
