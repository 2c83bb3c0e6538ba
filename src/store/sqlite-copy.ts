import type Database from 'better-sqlite3';
import { RolloutBudgetError } from '../errors.js';

/**
 * SQLite's VACUUM INTO `file` (`name`: the path the user gave for it). A full disk there is the
 * copy's (only the new file is written): said as such, where the state's store would say the
 * state's disk is full.
 */
export function vacuumInto(db: Database.Database, file: string, name = file): void {
  try {
    db.prepare('VACUUM INTO ?').run(file);
  } catch (error) {
    if (!String((error as { code?: unknown }).code ?? '').startsWith('SQLITE_FULL')) throw error;
    throw new RolloutBudgetError('IO_ERROR', `${name}: the disk holding the copy is full (SQLITE_FULL); the state is as it was`);
  }
}
