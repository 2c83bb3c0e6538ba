import { createRegistry, type Registry } from '../registry.js';
import { asyncStoreOf, type AsyncStore } from './async.js';
import { isPostgresUrl } from './url.js';

/** Opens a store at a location (a file path or a URL). */
export type StoreOpener = (location: string) => Promise<AsyncStore>;

/**
 * The store backends by name: `sqlite` (a file or ':memory:') and `postgres` (a URL). A store
 * registered under a URL scheme's name opens the URLs of that scheme (`redis` for `redis://...`:
 * storeKindOf).
 */
export function createStoreRegistry(): Registry<StoreOpener> {
  return createRegistry<StoreOpener>('store', {
    // Each backend is loaded when a state of its kind is opened (pg and better-sqlite3 take
    // tens of milliseconds to load).
    sqlite: async (path) => asyncStoreOf(new (await import('./sqlite.js')).SqliteStore(path)),
    postgres: async (url) => (await import('./postgres.js')).PostgresStore.connect(url),
  });
}

/**
 * The backend a `--state` value names: `postgres://` or `postgresql://` URLs `postgres`; a URL
 * whose scheme names a store in `registry` that store (a registered store was never reached: the
 * choice was the URL's shape alone); else `sqlite`, which refuses any other URL
 * (store/url.ts). O(length).
 */
export function storeKindOf(state: string, registry?: Registry<StoreOpener>): string {
  if (isPostgresUrl(state)) return 'postgres';
  const scheme = /^([a-z][a-z0-9+.-]*):\/\//i.exec(state)?.[1]?.toLowerCase();
  return scheme !== undefined && registry?.has(scheme) === true ? scheme : 'sqlite';
}

export function openAsyncStore(state: string, registry: Registry<StoreOpener> = createStoreRegistry()): Promise<AsyncStore> {
  return registry.get(storeKindOf(state, registry))(state);
}
