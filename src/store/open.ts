import { createRegistry, type Registry } from '../registry.js';
import { asyncStoreOf, type AsyncStore } from './async.js';
import { PostgresStore } from './postgres.js';
import { SqliteStore } from './sqlite.js';

/** Opens a store at a location (a file path or a URL). */
export type StoreOpener = (location: string) => Promise<AsyncStore>;

/** The store backends by name: `sqlite` (a file or ':memory:') and `postgres` (a URL). */
export function createStoreRegistry(): Registry<StoreOpener> {
  return createRegistry<StoreOpener>('store', {
    sqlite: async (path) => asyncStoreOf(new SqliteStore(path)),
    postgres: (url) => PostgresStore.connect(url),
  });
}

/** The backend a `--state` value names: `postgres://` or `postgresql://` URLs, else a SQLite path. */
export function storeKindOf(state: string): string {
  return /^postgres(ql)?:\/\//i.test(state) ? 'postgres' : 'sqlite';
}

export function openAsyncStore(state: string, registry: Registry<StoreOpener> = createStoreRegistry()): Promise<AsyncStore> {
  return registry.get(storeKindOf(state))(state);
}
