import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { driverFor, sqliteDriver } from '../src/store/sqlite-driver.js';

/** Opens an in-memory database with a driver and runs one query through the native addon. */
const roundTrip = (d: ReturnType<typeof driverFor>) => {
  const db = new d.Database(':memory:', d.options);
  try {
    return db.prepare('SELECT 40 + 2 AS v').get();
  } finally {
    db.close();
  }
};

describe('better-sqlite3 driver (store/sqlite-driver.ts)', () => {
  it('names the installed addon by path when it is there, and that path opens a database', () => {
    const d = sqliteDriver();
    expect(d.options.nativeBinding).toMatch(/better-sqlite3[/\\]build[/\\]Release[/\\]better_sqlite3\.node$/);
    expect(roundTrip(d)).toEqual({ v: 42 });
  });

  it('an install without build/Release/better_sqlite3.node falls back to the package, which finds its addon itself', () => {
    const d = driverFor(join('/nonexistent', 'build', 'Release', 'better_sqlite3.node'));
    expect(d.options).toEqual({});
    expect(roundTrip(d)).toEqual({ v: 42 });
  });
});
