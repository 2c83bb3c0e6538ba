import { RolloutBudgetError } from './errors.js';

/**
 * A typed registry for one extension point (value functions, posterior policies, solvers,
 * stores, verifiers, replay strategies). Created by a function, never a module global: each
 * caller owns its registry. Duplicate names throw; an unknown name throws and lists the
 * registered ones.
 */
export interface Registry<T> {
  readonly kind: string;
  register(name: string, entry: T): Registry<T>;
  get(name: string): T;
  has(name: string): boolean;
  names(): string[];
}

/** `check`, when given, vets each entry as it is registered (throws on a bad one). */
export function createRegistry<T>(kind: string, entries: Record<string, T> = {}, check?: (name: string, entry: T) => void): Registry<T> {
  const table = new Map<string, T>();
  const registry: Registry<T> = {
    kind,
    register(name, entry) {
      if (table.has(name)) {
        throw new RolloutBudgetError('DUPLICATE_NAME', `${kind} "${name}" is already registered`);
      }
      check?.(name, entry);
      table.set(name, entry);
      return registry;
    },
    get(name) {
      const entry = table.get(name);
      if (entry === undefined) {
        throw new RolloutBudgetError(
          'UNKNOWN_NAME',
          `unknown ${kind} "${name}"; registered: ${[...table.keys()].join(', ')}`,
        );
      }
      return entry;
    },
    has: (name) => table.has(name),
    names: () => [...table.keys()],
  };
  for (const [name, entry] of Object.entries(entries)) registry.register(name, entry);
  return registry;
}
