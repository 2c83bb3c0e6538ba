import { createRegistry, type Registry } from '../registry.js';
import { asyncStoreOf, type AsyncStore } from './async.js';
import { isPostgresUrl } from './url.js';

/** Opens a store at a location (a file path or a URL). */
export type StoreOpener = (location: string) => Promise<AsyncStore>;

/** The store backends by name: `sqlite` (a file or ':memory:') and `postgres` (a URL). */
export function createStoreRegistry(): Registry<StoreOpener> {
  return createRegistry<StoreOpener>('store', {
    // Each backend is loaded when a state of its kind is opened (pg and better-sqlite3 take
    // tens of milliseconds to load).
    sqlite: async (path) => asyncStoreOf(new (await import('./sqlite.js')).SqliteStore(path)),
    postgres: async (url) => (await import('./postgres.js')).PostgresStore.connect(url),
  });
}

/** The backend a `--state` value names: `postgres://` or `postgresql://` URLs, else a SQLite path. */
export function storeKindOf(state: string): string {
  return isPostgresUrl(state) ? 'postgres' : 'sqlite';
}

export function openAsyncStore(state: string, registry: Registry<StoreOpener> = createStoreRegistry()): Promise<AsyncStore> {
  return registry.get(storeKindOf(state))(state);
}
