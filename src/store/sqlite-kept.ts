import type Database from 'better-sqlite3';

/**
 * better-sqlite3's objects kept referenced until the process (or its thread) ends, so Node 24
 * never collects one.
 *
 * Node 24's node::ObjectWrap (node_object_wrap.h, since 24.19.0: nodejs/node#65446) adds an
 * environment cleanup hook for each wrapped object and removes it in the object's destructor,
 * through the isolate's current environment; an addon compiled against those headers does so.
 * better-sqlite3 12 wraps its Database, Statement and StatementIterator that way.
 * When V8 collects one from a task Node runs outside any context (a garbage collection its event
 * loop starts between callbacks), that lookup finds no environment and Node aborts: `Assertion
 * failed: (env) != nullptr` in RemoveEnvironmentCleanupHook, SIGABRT, exit 134, after or in the
 * middle of the work (better-sqlite3 13 no longer derives them from node::ObjectWrap, and
 * requires Node 22). An object still referenced when the environment ends is deleted by that
 * hook while the environment is there, which is safe. So the Database class the driver hands
 * out (sqlite-driver.ts) keeps every connection it opens and every statement it prepares, and
 * takes away what would make garbage of its own: `pragma()` (a statement a call: use
 * `exec('PRAGMA …')`) and a statement's `iterate()` (an iterator a call). The store's classes
 * prepare their statements once a connection, so what is kept is bounded: a few dozen
 * statements a connection, the connections a process opens. On Node 20 and 22 nothing changes
 * but that.
 */
const kept: object[] = [];

/** How many connections and statements are kept (tests: it must not grow with requests). */
export function keptObjects(): number {
  return kept.length;
}

/** `object`, kept until the process ends. */
function keep<T extends object>(object: T): T {
  kept.push(object);
  return object;
}

const classes = new WeakMap<typeof Database, typeof Database>();

/** `Base` (better-sqlite3's Database class) as a subclass that keeps what it makes. O(1). */
export function keeping(Base: typeof Database): typeof Database {
  let Kept = classes.get(Base);
  if (Kept === undefined) {
    // Typed loosely: better-sqlite3's generic prepare() signature cannot be overridden as is.
    const Plain = Base as unknown as new (...args: unknown[]) => { prepare(source: string): Database.Statement; pragma(source: string): unknown };
    Kept = class extends Plain {
      constructor(...args: unknown[]) {
        super(...args);
        kept.push(this);
      }

      override prepare(source: string): Database.Statement {
        const statement = super.prepare(source);
        kept.push(statement);
        Object.defineProperty(statement, 'iterate', { value: noIterate, configurable: true });
        return statement;
      }

      override pragma(): never {
        throw new Error('pragma() prepares a statement a call, which Node 24 may collect outside a context (store/sqlite-kept.ts): use exec(\'PRAGMA …\')');
      }
    } as unknown as typeof Database;
    classes.set(Base, Kept);
  }
  return Kept;
}

function noIterate(): never {
  throw new Error('iterate() makes an iterator a call, which Node 24 may collect outside a context (store/sqlite-kept.ts): use all(), or a SQL function that takes each row');
}

const lenient = new WeakMap<typeof Database, typeof Database>();

/**
 * The same for code that is not the store's (SqliteStore.driver(): tools and tests that write a
 * state file directly): `pragma()` runs through a kept statement, as better-sqlite3's does
 * (`simple`: the first value, else every row; a PRAGMA that returns none runs and gives []),
 * and `iterate()` works, its iterator kept. What such code keeps grows with its calls.
 */
export function keepingAll(Base: typeof Database): typeof Database {
  let Kept = lenient.get(Base);
  if (Kept === undefined) {
    const Strict = keeping(Base) as unknown as new (...args: unknown[]) => { prepare(source: string): Database.Statement };
    Kept = class extends Strict {
      override prepare(source: string): Database.Statement {
        const statement = super.prepare(source);
        const iterate = (Object.getPrototypeOf(statement) as Database.Statement).iterate;
        Object.defineProperty(statement, 'iterate', { value: (...args: unknown[]) => keep(iterate.apply(statement, args)) });
        return statement;
      }

      pragma(source: string, options?: { simple?: boolean }): unknown {
        const statement = this.prepare(`PRAGMA ${source}`);
        if (!statement.reader) {
          statement.run();
          return [];
        }
        return options?.simple === true ? statement.pluck().get() : statement.all();
      }
    } as unknown as typeof Database;
    lenient.set(Base, Kept);
  }
  return Kept;
}

