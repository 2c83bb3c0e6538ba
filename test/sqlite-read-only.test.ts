import { spawnSync } from 'node:child_process';
import { chmodSync, copyFileSync, mkdirSync, readdirSync, readFileSync, symlinkSync, truncateSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { Database } from './sqlite.js';
import { describe, expect, it, onTestFinished } from 'vitest';
import { CLI } from './service-helpers.js';
import { tempDir } from './temp.js';
import { dumpState } from './state-file.js';

// A SQLite state read by a user who cannot write it: a teammate's `inspect` of the trainer's
// state, a dry-run `plan` on another account's file, a state on a read-only mount. SQLite in
// WAL mode made -wal and -shm files beside the state for that reader and left them at close
// (only a connection that can write removes them), owned by the reader: the owner's next
// observe then failed (SQLITE_READONLY on that -shm) until someone removed them by hand.
//
// The reader is a real other user: run as root (as CI is), the commands run as uid 65534
// (nobody) on files root owns; run as anyone else, on files made read-only (0444) or in a
// folder made read-only (0555), which SQLite then cannot write either.

const isRoot = process.getuid?.() === 0;
const READER = 65534;
/** The owner's uid in the root-only test: daemon, a user other than the reader and not root (root may write any file). */
const OWNER = 1;

const shared = tempDir('rb-sqlite-read-only-');
if (isRoot) {
  // The reader must be able to reach the files: every folder from this one up to the run's temp root.
  for (let dir = shared; ; dir = dirname(dir)) {
    chmodSync(dir, 0o711);
    if (dir === process.env.RB_TEST_TMP_ROOT || dirname(dir) === dir) break;
  }
}

/** A new temp folder the reader can reach. */
function readerDir(prefix: string): string {
  const dir = join(tempDir(prefix), 'run');
  mkdirSync(dir);
  if (isRoot) chmodSync(dirname(dir), 0o711);
  return dir;
}

function run(args: string[], uid?: number) {
  return spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', timeout: 30_000, ...(uid === undefined ? {} : { uid, gid: uid }) });
}

/** The CLI as the reader: another user when this is root, else this user on files it cannot write. */
const asReader = (args: string[]) => run(args, isRoot ? READER : undefined);

/** A folder of a state observed by its owner (this process's user): prompts a (3 rollouts) and b (2). */
function stateFolder(): { dir: string; state: string } {
  const dir = readerDir('rb-read-only-');
  const state = join(dir, 'state.db');
  const results = join(dir, 'results.jsonl');
  writeFileSync(results, '{"prompt_id":"a","reward":1}\n{"prompt_id":"a","reward":0}\n{"prompt_id":"a","reward":1}\n{"prompt_id":"b","reward":0}\n{"prompt_id":"b","reward":0}\n');
  const made = run(['observe', '--results', results, '--state', state]);
  expect(made.status, made.stderr).toBe(0);
  writeFileSync(join(dir, 'prompts.jsonl'), '{"id":"a","prompt_tokens":10,"prompt":"1+1?","ground_truth":"2"}\n{"id":"c","prompt_tokens":12,"prompt":"2+2?","ground_truth":"4"}\n');
  return { dir, state };
}

/** The state file made unwritable for the reader, in a folder the reader may write (where SQLite made its files). */
function lockFile(dir: string, state: string): void {
  chmodSync(dir, 0o777);
  chmodSync(state, isRoot ? 0o644 : 0o444);
  onTestFinished(() => chmodSync(dir, 0o700));
}

/** The folder made unwritable for the reader, the state file left writable. */
function lockFolder(dir: string, state: string): void {
  chmodSync(state, 0o666);
  chmodSync(dir, isRoot ? 0o755 : 0o555);
  onTestFinished(() => chmodSync(dir, 0o700));
}

const dump = (state: string) => dumpState(state, 'SELECT * FROM meta ORDER BY key');

const listing = (dir: string) => readdirSync(dir).sort();
const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

describe('a SQLite state this user cannot write', () => {
  it('inspect answers as for its owner and leaves no -wal or -shm file beside it', () => {
    const { dir, state } = stateFolder();
    lockFile(dir, state);
    const before = listing(dir);
    for (const args of [['inspect', '--state', state], ['inspect', '--state', state, '--prompt', 'a']]) {
      const reader = asReader(args);
      expect(reader.status, reader.stderr).toBe(0);
      expect(listing(dir)).toEqual(before);
      const owner = run(args);
      expect(owner.status, owner.stderr).toBe(0);
      expect(reader.stdout).toBe(owner.stdout);
    }
    expect(JSON.parse(run(['inspect', '--state', state]).stdout).prompts).toBe(2);
  });

  it('inspect counts the prompts, not pooled rows another program left stale, and says it could not rebuild them (it printed the stale count, silently)', () => {
    const { dir, state } = stateFolder();
    // Another writer's prompt (an old build, SQL): the prompts' row written, the pooled rows not.
    const db = new Database(state);
    db.exec("INSERT INTO prompts (id, grp, successes, failures, last_step, rollouts, reward_sum, correct_count, correct_tokens, wrong_count, wrong_tokens) VALUES ('z', NULL, 1, 1, 0, 2, 1, 0, 0, 0, 0)");
    db.close();
    lockFile(dir, state);
    const reader = asReader(['inspect', '--state', state]);
    expect(reader.status, reader.stderr).toBe(0);
    expect(JSON.parse(reader.stdout).prompts).toBe(3);
    expect(reader.stderr).toMatch(/^rollout-budget: note: .*state\.db: the pooled rows \(.*\) do not sum the prompts, and were not rebuilt: .*state\.db: .*\. A command that may write the state rebuilds them \(serve at its start, inspect\)\n$/);
    // Its owner's inspect rebuilds them, and says so once.
    const owner = run(['inspect', '--state', state]);
    expect(owner.stderr).toMatch(/the pooled rows .* rebuilt from the prompts\n$/);
    expect(JSON.parse(owner.stdout).prompts).toBe(3);
    expect(run(['inspect', '--state', state]).stderr).toBe('');
  });

  it('backup copies it, the copy the same rows, and makes nothing beside it', () => {
    const { dir, state } = stateFolder();
    lockFile(dir, state);
    const before = listing(dir);
    const copy = join(dir, 'copy.db');
    const r = asReader(['backup', '--state', state, '--out', copy]);
    expect(r.status, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ out: copy, prompts: 2 });
    expect(listing(dir)).toEqual([...before, 'copy.db'].sort());
    expect(dump(copy)).toBe(dump(state)); // (this test's own read-only connection leaves -wal and -shm: after the listing)
  });

  it.runIf(isRoot)('its owner can still observe after another user inspected it (the files that inspect left made it fail)', () => {
    const { dir, state } = stateFolder();
    lockFile(dir, state);
    spawnSync('chown', [String(OWNER), state]);
    expect(asReader(['inspect', '--state', state]).status).toBe(0);
    const results = join(dir, 'more.jsonl');
    writeFileSync(results, '{"prompt_id":"c","reward":1}\n');
    chmodSync(results, 0o644);
    const owner = run(['observe', '--results', results, '--state', state], OWNER);
    expect(owner.status, owner.stderr).toBe(0);
    expect(JSON.parse(owner.stdout).applied).toBe(1);
  });

  it('plan writes the same plan as its owner\'s when it has nothing to record, and nothing beside the state', () => {
    const { dir, state } = stateFolder();
    lockFile(dir, state);
    const before = listing(dir);
    const args = (out: string) => ['plan', '--prompts', join(dir, 'prompts.jsonl'), '--state', state, '--budget-rollouts', '16', '--out', out];
    const reader = asReader(args(join(dir, 'reader.json')));
    expect(reader.status, reader.stderr).toBe(0);
    expect(listing(dir)).toEqual([...before, 'reader.json'].sort());
    const owner = run(args(join(dir, 'owner.json')));
    expect(owner.status, owner.stderr).toBe(0);
    expect(readFileSync(join(dir, 'reader.json'), 'utf8')).toBe(readFileSync(join(dir, 'owner.json'), 'utf8'));
  });

  it('a plan that must record its prompts\' group, and observe, exit 2 naming the file and why; nothing is written', () => {
    const { dir, state } = stateFolder();
    lockFile(dir, state);
    const rows = dump(state);
    const grouped = join(dir, 'grouped.jsonl');
    writeFileSync(grouped, '{"id":"a","prompt_tokens":10,"group":"arith"}\n');
    const results = join(dir, 'more.jsonl');
    writeFileSync(results, '{"prompt_id":"c","reward":1}\n');
    const before = listing(dir);
    const why = isRoot ? `this user \\(uid ${READER}\\) cannot write it \\(owner uid 0, mode 0644\\)` : 'this user \\(uid \\d+\\) cannot write it \\(owner uid \\d+, mode 0444\\)';
    for (const args of [['plan', '--prompts', grouped, '--state', state, '--budget-rollouts', '8', '--out', '-'], ['observe', '--results', results, '--state', state]]) {
      const r = asReader(args);
      expect(r.status, r.stderr).toBe(2);
      expect(r.stdout).toBe('');
      expect(r.stderr).toMatch(new RegExp(`^rollout-budget: ${escape(state)}: ${why}, so it was opened read-only and this command cannot write it; nothing was written\\. Run it as the state's owner, or give this user write access to the file and its folder\\n$`));
      expect(dump(state)).toBe(rows);
      expect(listing(dir)).toEqual(before);
    }
  });

  it('serve and execute refuse it before opening anything (they always write it)', () => {
    const { dir, state } = stateFolder();
    const plan = run(['plan', '--prompts', join(dir, 'prompts.jsonl'), '--state', state, '--budget-rollouts', '8', '--out', join(dir, 'plan.json')]);
    expect(plan.status, plan.stderr).toBe(0);
    lockFile(dir, state);
    const before = listing(dir);
    const serve = asReader(['serve', '--state', state, '--port', '0']);
    expect(serve.status).toBe(2);
    expect(serve.stderr).toMatch(new RegExp(`^rollout-budget: ${escape(state)}: this user \\(uid \\d+\\) cannot write it \\(owner uid \\d+, mode 0[46]44\\); serve writes each observe and the prompts it plans into it, so it must be writable, and nothing was opened\\.`));
    // The port is never asked for its models: the state is refused first.
    const execute = asReader(['execute', '--plan', join(dir, 'plan.json'), '--prompts', join(dir, 'prompts.jsonl'), '--state', state, '--endpoint', 'http://127.0.0.1:1', '--model', 'm', '--out', '-']);
    expect(execute.status).toBe(2);
    expect(execute.stderr).toMatch(/cannot write it \(owner uid \d+, mode 0[46]44\); execute and loop keep partial rollouts in it, so it must be writable, and nothing was opened\./);
    expect(listing(dir)).toEqual(before);
  });

  it('in a folder this user cannot write, inspect and plan read it and make nothing there', () => {
    const { dir, state } = stateFolder();
    const owner = run(['inspect', '--state', state]).stdout;
    lockFolder(dir, state);
    const before = listing(dir);
    const reader = asReader(['inspect', '--state', state]);
    expect(reader.status, reader.stderr).toBe(0);
    expect(reader.stdout).toBe(owner);
    const plan = asReader(['plan', '--prompts', join(dir, 'prompts.jsonl'), '--state', state, '--budget-rollouts', '16', '--out', '-']);
    expect(plan.status, plan.stderr).toBe(0);
    expect(JSON.parse(plan.stdout).totals.rollouts).toBe(16);
    expect(listing(dir)).toEqual(before);
  });

  it('through a symlink from a folder this user may write to a state in one it may not, inspect makes nothing beside either', () => {
    const { dir, state } = stateFolder();
    const owner = run(['inspect', '--state', state]).stdout;
    lockFolder(dir, state);
    const links = readerDir('rb-read-only-links-');
    chmodSync(links, 0o777);
    const link = join(links, 'state.db');
    symlinkSync(state, link);
    const before = listing(dir);
    const reader = asReader(['inspect', '--state', link]);
    expect(reader.status, reader.stderr).toBe(0);
    expect(reader.stdout).toBe(owner);
    expect(listing(dir)).toEqual(before);
    expect(listing(links)).toEqual(['state.db']);
  });

  it('a state over 2 GiB, with nothing of its owner\'s open, is refused naming its size (a copy in memory cannot hold it)', () => {
    const { dir, state } = stateFolder();
    truncateSync(state, 3 * 2 ** 30); // a sparse 3 GiB: only the size is read before the refusal
    lockFile(dir, state);
    const before = listing(dir);
    const r = asReader(['inspect', '--state', state]);
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/cannot write it \(owner uid \d+, mode 0[46]44\), and at 3\.0 GiB it is too large to read from a copy in memory \(at most 2 GiB\): run the command as its owner, or while its owner has it open/);
    expect(listing(dir)).toEqual(before);
  });

  it('while its owner has it open, inspect reads the changes still in the owner\'s -wal; a -wal with no -shm (a crashed writer) is refused', () => {
    const { dir, state } = stateFolder();
    // The owner's connection, held open: the next observe's commit stays in the -wal (no checkpoint at its close).
    const held = new Database(state);
    held.prepare('SELECT count(*) FROM prompts').get(); // opens its -wal and -shm
    try {
      const results = join(dir, 'more.jsonl');
      writeFileSync(results, '{"prompt_id":"c","reward":1}\n');
      expect(run(['observe', '--results', results, '--state', state]).status).toBe(0);
      expect(readFileSync(`${state}-wal`).length).toBeGreaterThan(0);
      lockFile(dir, state);
      for (const suffix of ['-wal', '-shm']) chmodSync(`${state}${suffix}`, isRoot ? 0o644 : 0o444);
      const before = listing(dir);
      const reader = asReader(['inspect', '--state', state]);
      expect(reader.status, reader.stderr).toBe(0);
      expect(JSON.parse(reader.stdout).prompts).toBe(3);
      expect(listing(dir)).toEqual(before);

      // The same file and log without the -shm: what a writer killed mid-run leaves.
      const crashed = readerDir('rb-read-only-crashed-');
      const copy = join(crashed, 'state.db');
      copyFileSync(state, copy);
      copyFileSync(`${state}-wal`, `${copy}-wal`);
      lockFile(crashed, copy);
      const refused = asReader(['inspect', '--state', copy]);
      expect(refused.status).toBe(2);
      expect(refused.stderr).toContain(`and its write-ahead log (${copy}-wal) holds changes only a process that can write the state may apply: run a command on it as its owner first`);
      expect(listing(crashed)).toEqual(['state.db', 'state.db-wal']);
    } finally {
      held.close();
    }
  });
});

describe('no state file yet, in a folder this user cannot write', () => {
  it('plan, observe, serve and execute exit 2 naming the folder and why (SQLite said only "unable to open database file"), as does backup --out there; inspect still answers; nothing is made', () => {
    const { dir } = stateFolder();
    const plan = join(dir, 'plan.json');
    const planned = run(['plan', '--prompts', join(dir, 'prompts.jsonl'), '--state', ':memory:', '--budget-rollouts', '4', '--max-tokens', '64', '--out', plan]);
    expect(planned.status, planned.stderr).toBe(0);
    lockFolder(dir, join(dir, 'state.db'));
    const before = listing(dir);
    const missing = join(dir, 'new.db');
    const reason = new RegExp(
      `^rollout-budget: ${escape(missing)}: cannot open the state database \\(there is no state file there yet, and its folder ${escape(dir)} cannot be written by this user \\(uid \\d+\\), so none can be made: give the state a path in a folder this user can write\\)\n$`,
    );
    for (const args of [
      ['plan', '--prompts', join(dir, 'prompts.jsonl'), '--state', missing, '--budget-rollouts', '8'],
      ['observe', '--results', join(dir, 'results.jsonl'), '--state', missing],
      ['serve', '--state', missing, '--port', '0'],
      // execute opens the state before it sends anything (nothing listens on port 1).
      ['execute', '--plan', plan, '--prompts', join(dir, 'prompts.jsonl'), '--endpoint', 'http://127.0.0.1:1', '--model', 'm', '--state', missing],
    ]) {
      const reader = asReader(args);
      expect(reader.status, `${args[0]}: ${reader.stderr}`).toBe(2);
      expect(reader.stderr, args[0]).toMatch(reason);
      expect(listing(dir)).toEqual(before);
    }
    // backup reads the state (its folder locked: from a copy in memory) and cannot write --out
    // there: SQLite's words blamed the state ("the state file cannot be opened (SQLITE_CANTOPEN ...").
    const out = join(dir, 'copy.db');
    const backup = asReader(['backup', '--state', join(dir, 'state.db'), '--out', out]);
    expect(backup.status, backup.stderr).toBe(2);
    expect(backup.stderr).toMatch(new RegExp(`^rollout-budget: --out ${escape(out)}: cannot write the copy there \\(EACCES: this user \\(uid \\d+\\) cannot write the folder ${escape(dir)}\\); the state is as it was\n$`));
    expect(listing(dir)).toEqual(before);
    const inspect = asReader(['inspect', '--state', missing]);
    expect(inspect.status, inspect.stderr).toBe(0);
    expect(JSON.parse(inspect.stdout).prompts).toBe(0);
    expect(listing(dir)).toEqual(before);
  });
});
