// better-sqlite3 for tests that open state files themselves: SqliteStore.driver(), whose
// connections, statements and iterators are kept until the test process ends, as Node 24 aborts
// a process where V8 collects one outside a context (src/store/sqlite-kept.ts).
import { SqliteStore } from '../src/index.js';

export const Database = SqliteStore.driver();
