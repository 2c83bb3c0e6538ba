import { spawnSync } from 'node:child_process';
import { closeSync, existsSync, openSync, rmSync, writeFileSync } from 'node:fs';
import { gzipSync } from 'node:zlib';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseJson, readText } from '../src/index.js';
import { binaryKind } from '../src/io/file-kind.js';
import { cli } from './cli-helpers.js';
import { CLI } from './service-helpers.js';
import { tempDir } from './temp.js';

// Files that are not what their place takes, or that cannot be read or written: a file of another
// kind (a device, a line without end, a plan where JSONL goes, compressed, UTF-16, SQLite,
// Parquet), a path stat(2) cannot follow, a report that cannot be written whole, a state on a
// full disk. Each test named after what broke.

describe('a file of another kind given in its place', () => {
  const fixture = join(import.meta.dirname, '..', 'fixtures', 'qwen-math100-k8');
  const plan = join(fixture, 'plan.json');
  const prompts = join(fixture, 'prompts.jsonl');

  it('a file whose line never ends is stopped at the longest string Node holds, not read on (a 600 MB line: 1.6 GB and a TypeError)', () => {
    const file = join(tempDir(), 'one-line.jsonl');
    writeFileSync(file, Buffer.alloc(2 ** 29, 0x78)); // 2^29 bytes of "x", no newline
    try {
      for (const argv of [['plan', '--prompts', file, '--state', ':memory:', '--budget-rollouts', '8'], ['observe', '--results', file, '--state', ':memory:']]) {
        const r = spawnSync(process.execPath, [CLI, ...argv], { encoding: 'utf8', timeout: 60_000 });
        expect(r.status, argv[0]).toBe(2);
        expect(r.stderr, argv[0]).toBe(`rollout-budget: ${file}:1: a line with no end after 536870912 bytes, more than Node can hold as one string (536870888 characters): no line of JSON this tool reads is that long\n`);
      }
    } finally {
      rmSync(file);
    }
  }, 120_000);

  it('a device (/dev/zero, /dev/urandom) is refused at once by every reader; stdin by its own names is still read', () => {
    // In a process of its own with a time limit: before, plan grew to 6.3 GB and observe and replay
    // copied the device into a temporary file without end.
    const run = (argv: string[]) => spawnSync(process.execPath, [CLI, ...argv], { encoding: 'utf8', timeout: 20_000 });
    for (const [argv, device] of [
      [['plan', '--prompts', '/dev/zero', '--state', ':memory:', '--budget-rollouts', '8'], '/dev/zero'],
      [['observe', '--results', '/dev/zero', '--state', ':memory:'], '/dev/zero'],
      [['replay', '--log', '/dev/urandom', '--policies', 'uniform'], '/dev/urandom'],
      [['simulate', '--scenario', '/dev/zero'], '/dev/zero'],
    ] as const) {
      const r = run([...argv]);
      expect(r.signal, argv[0]).toBeNull();
      expect(r.status, argv[0]).toBe(2);
      expect(r.stderr, argv[0]).toBe(`rollout-budget: ${device}: a device, not a file: give a file, or - for stdin\n`);
    }
    const file = join(tempDir(), 'results.jsonl');
    writeFileSync(file, '{"prompt_id":"a","reward":1}\n');
    const fd = openSync(file, 'r');
    try {
      const stdin = spawnSync(process.execPath, [CLI, 'observe', '--results', '/dev/stdin', '--state', ':memory:'], { encoding: 'utf8', timeout: 20_000, stdio: [fd, 'pipe', 'pipe'] });
      expect(stdin.status, stdin.stderr).toBe(0);
      expect(JSON.parse(stdin.stdout)).toMatchObject({ applied: 1 });
    } finally {
      closeSync(fd);
    }
  });

  it('a plan file (one JSON document over several lines) where JSONL goes says so', async () => {
    const multiLine = '{\n'; // the plan file's first line: the writer indents
    expect(readText(plan).startsWith(multiLine)).toBe(true);
    for (const argv of [['observe', '--results', plan, '--state', ':memory:'], ['plan', '--prompts', plan, '--state', ':memory:', '--budget-rollouts', '8']]) {
      const run = await cli(argv);
      expect(run.code).toBe(2);
      expect(run.stderr).toBe(`rollout-budget: ${plan}:1: malformed JSON: the line is only "{"; JSONL holds a whole JSON object on each line, and this looks like one JSON document over several lines\n`);
    }
  });

  it('JSONL where the plan file goes says what it seems to be; a plan that is merely malformed still says malformed JSON', async () => {
    const dir = tempDir();
    const jsonlPlan = join(dir, 'plan.jsonl');
    expect((await cli(['plan', '--prompts', prompts, '--state', ':memory:', '--budget-rollouts', '800', '--format', 'jsonl', '--out', jsonlPlan])).code).toBe(0);
    const cases: [string, string][] = [
      [prompts, ' (prompts, by its "id")'],
      [jsonlPlan, ' (a plan written with --format jsonl)'],
    ];
    for (const [file, kind] of cases) {
      const run = await cli(['execute', '--plan', file, '--prompts', prompts, '--endpoint', 'http://127.0.0.1:9/v1', '--model', 'm', '--out', join(dir, 'r.jsonl')]);
      expect(run.code).toBe(2);
      expect(run.stderr).toBe(`rollout-budget: ${file}:2: a second JSON value: this is JSONL, one object a line${kind}, not the one JSON document of a plan file, as \`plan\` writes it by default (--format json)\n`);
    }
    const broken = join(dir, 'broken.json');
    writeFileSync(broken, readText(plan).slice(0, 200));
    const run = await cli(['execute', '--plan', broken, '--prompts', prompts, '--endpoint', 'http://127.0.0.1:9/v1', '--model', 'm']);
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/^rollout-budget: .*broken\.json: malformed JSON \(/);
  });

  it('a compressed, UTF-16, SQLite or Parquet file is named as one, with what to do; nothing is written', async () => {
    const dir = tempDir();
    const text = readText(prompts);
    const gz = join(dir, 'prompts.jsonl.gz');
    writeFileSync(gz, gzipSync(text)); // real gzip (node:zlib)
    const utf16 = join(dir, 'prompts-utf16.jsonl');
    writeFileSync(utf16, Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(text, 'utf16le')])); // as Notepad's "Unicode" saves it
    const state = join(dir, 'state.db');
    const results = join(dir, 'results.jsonl');
    writeFileSync(results, '{"prompt_id":"a","step":0,"rewards":[1,0]}\n');
    expect((await cli(['observe', '--results', results, '--state', state])).code).toBe(0); // a real state file
    // Not a whole Parquet file: its first bytes, the magic "PAR1" every Parquet file starts with
    // (apache/parquet-format README, "File format"), which is all the check reads.
    const parquet = join(dir, 'train.parquet');
    writeFileSync(parquet, Buffer.concat([Buffer.from('PAR1'), Buffer.from([0x15, 0x04, 0x15, 0x80, 0x01, 0x15, 0x00, 0x4c])]));
    const cases: [string, string][] = [
      [gz, 'this is gzip-compressed data, not UTF-8 text: decompress it first (gunzip -k, or zcat into a pipe)'],
      [utf16, 'this is UTF-16 text (little-endian, as Windows\' "Unicode"), not UTF-8 text: save it as UTF-8 (iconv -f UTF-16 -t UTF-8)'],
      [state, 'this is a SQLite database (a state file?), not UTF-8 text: a state goes to --state, and this place takes a text file'],
      [parquet, 'this is a Parquet file (as verl\'s datasets are), not UTF-8 text: write its rows as JSONL first, one JSON object a line (a verl dataset as prompts, with the ids the verl integration gives them: python -m rollout_budget.dataset <file>.parquet --out prompts.jsonl, from the Python package in python/; other rows, with pandas: pd.read_parquet(path).to_json(out, orient="records", lines=True))'],
    ];
    const out = join(dir, 'out');
    for (const [file, message] of cases) {
      for (const [argv, where] of [
        [['plan', '--prompts', file, '--state', join(dir, 'new.db'), '--budget-rollouts', '8', '--out', out], `${file}:1`],
        [['observe', '--results', file, '--state', join(dir, 'new.db')], `${file}:1`],
        [['replay', '--log', file, '--out', out], `${file}:1`],
        [['execute', '--plan', file, '--prompts', prompts, '--endpoint', 'http://127.0.0.1:9/v1', '--model', 'm', '--out', out], `${file}:1`],
      ] as const) {
        const run = await cli([...argv]);
        expect(run.code, `${argv.join(' ')}: ${run.stderr}`).toBe(2);
        expect(run.stderr).toBe(`rollout-budget: ${where}: ${message}\n`);
      }
    }
    expect(existsSync(join(dir, 'new.db'))).toBe(false);
    expect(existsSync(out)).toBe(false);
    // Through stdin too (spooled, then read as a file).
    const piped = spawnSync(process.execPath, [CLI, 'plan', '--prompts', '-', '--state', ':memory:', '--budget-rollouts', '8'], { input: gzipSync(text), encoding: 'utf8' });
    expect(piped.status).toBe(2);
    expect(piped.stderr).toBe(`rollout-budget: <stdin>:1: ${cases[0]![1]}\n`);
  });

  it('text that merely starts like one is not named so: a JSON line beginning with "PK" or "BZh" is malformed JSON as before', () => {
    expect(binaryKind(Buffer.from('{"id":"a"}'))).toBeUndefined();
    expect(binaryKind('BZh')).toBe('this is bzip2-compressed data, not UTF-8 text: decompress it first (bunzip2 -k)');
    expect(() => parseJson('PK', 'f:3')).toThrow('f:3: malformed JSON (');
    expect(() => parseJson('PK\u0003\u0004', 'f:3')).toThrow('f:3: this is a zip archive, not UTF-8 text: unzip it first');
    // Bytes that are text (a SQLite header before any binary page) are named by the JSON parse.
    expect(() => parseJson('SQLite format 3\u0000', 'plan.json')).toThrow('plan.json: this is a SQLite database (a state file?)');
  });
});

describe('a path stat(2) cannot follow', () => {
  it('a loop of symbolic links or a name too long is named with its errno, exit 2, for every reader and writer (it was an internal error with a stack trace)', async () => {
    // Found by a hostile review: observe --results, replay --log, --state and every --out crashed with exit 1.
    const { symlinkSync } = await import('node:fs');
    const dir = tempDir();
    const loop = join(dir, 'loop1');
    symlinkSync(join(dir, 'loop2'), loop);
    symlinkSync(loop, join(dir, 'loop2'));
    const long = join(dir, 'a'.repeat(300));
    const state = join(dir, 'state.db');
    const results = join(dir, 'r.jsonl');
    writeFileSync(results, '{"prompt_id":"a","reward":1}\n');
    expect((await cli(['observe', '--results', results, '--state', state])).code).toBe(0);
    const prompts = join(dir, 'p.jsonl');
    writeFileSync(prompts, '{"id":"a"}\n');
    let ran = 0;
    for (const [path, why] of [[loop, 'ELOOP: a loop of symbolic links'], [long, 'ENAMETOOLONG: a name in it is longer than the file system takes']] as const) {
      for (const args of [
        ['observe', '--results', path, '--state', state],
        ['replay', '--log', path, '--quiet'],
        ['inspect', '--state', path],
        ['plan', '--prompts', prompts, '--state', state, '--out', path],
        ['backup', '--state', state, '--out', path],
      ]) {
        const r = await cli(args);
        expect(r.code, `${args.join(' ')}: ${r.stderr}`).toBe(2);
        expect(r.stderr, args[0]).toContain(`${path}: cannot `);
        expect(r.stderr, args[0]).toContain(why.split(':')[0]!);
        expect(r.stderr, args[0]).not.toContain('internal error');
        ran++;
      }
    }
    expect(ran).toBe(10);
  });

  it('a FIFO named like a step file in a log folder is refused, naming it (replay waited on it forever)', async () => {
    const dir = tempDir();
    const folder = join(dir, 'verl');
    const { mkdirSync } = await import('node:fs');
    mkdirSync(folder);
    for (const step of [1, 2]) writeFileSync(join(folder, `${step}.jsonl`), `{"input":"p","output":"x","score":1,"step":${step}}\n`);
    expect(spawnSync('mkfifo', [join(folder, '3.jsonl')]).status).toBe(0);
    // A process of its own, with a time limit: the code before waited in a blocking open(2).
    const r = spawnSync(process.execPath, [CLI, 'replay', '--log', folder, '--quiet', '--policies', 'uniform'], { encoding: 'utf8', timeout: 20_000 });
    expect(r.status).toBe(2);
    expect(r.stderr).toContain(`${join(folder, '3.jsonl')}: a FIFO (named pipe), not a file, in the log folder ${folder}: move it out of the folder`);
  }, 30_000);
});

describe('a report that cannot be written whole', () => {
  it('a folder where one of its files goes is named before anything is replaced: the last report stays whole, no temp file is left', async () => {
    // Found by a hostile review: summary.md a folder, and metrics.json was already this run's
    // beside the last run's summary and report, with two temp files left.
    const { mkdirSync, readdirSync, readFileSync } = await import('node:fs');
    const dir = tempDir();
    const log = join(dir, 'r.jsonl');
    writeFileSync(log, [0, 1, 2].flatMap((step) => ['a', 'b'].map((p) => JSON.stringify({ prompt_id: p, step, rewards: [1, 0, 1, 0] }))).join('\n') + '\n');
    const out = join(dir, 'rep');
    mkdirSync(out);
    writeFileSync(join(out, 'metrics.json'), 'the last run\n');
    mkdirSync(join(out, 'summary.md'));
    const r = await cli(['replay', '--log', log, '--quiet', '--policies', 'uniform', '--out', out]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`${out}: cannot write the report (summary.md there is a folder): move it away`);
    expect(readFileSync(join(out, 'metrics.json'), 'utf8')).toBe('the last run\n');
    expect(readdirSync(out).sort()).toEqual(['metrics.json', 'summary.md']);
    // A write failing after two temp files were written (here: the third's temp name is taken
    // by a folder; a full disk does the same) removes them. cli() runs in this process: its pid.
    rmSync(join(out, 'summary.md'), { recursive: true });
    mkdirSync(join(out, `.report.html.tmp-${process.pid}`));
    const cut = await cli(['replay', '--log', log, '--quiet', '--policies', 'uniform', '--out', out]);
    expect(cut.code).toBe(2);
    expect(cut.stderr).toContain(`${out}: cannot write the report (EISDIR)`);
    expect(readdirSync(out).sort()).toEqual([`.report.html.tmp-${process.pid}`, 'metrics.json']);
    expect(readFileSync(join(out, 'metrics.json'), 'utf8')).toBe('the last run\n');
  });
});

describe('a state on a full disk', () => {
  // Needs a small file system to fill: a tmpfs, which only root may mount (CI runs as root).
  const mountable = (() => {
    if (process.getuid?.() !== 0) return false;
    const probe = tempDir();
    const ok = spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', probe]).status === 0;
    if (ok) spawnSync('umount', [probe]);
    return ok;
  })();
  it.runIf(mountable)('is named as such, even by inspect (it said "disk I/O error" alone)', async () => {
    const { copyFileSync } = await import('node:fs');
    const dir = tempDir();
    const state = join(dir, 'st.db');
    const results = join(dir, 'r.jsonl');
    writeFileSync(results, '{"prompt_id":"a","reward":1}\n');
    expect((await cli(['observe', '--results', results, '--state', state])).code).toBe(0);
    const full = join(dir, 'full');
    const { mkdirSync } = await import('node:fs');
    mkdirSync(full);
    expect(spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', full]).status).toBe(0);
    try {
      copyFileSync(state, join(full, 'st.db'));
      spawnSync('sh', ['-c', `head -c 2000000 /dev/zero > ${join(full, 'fill')}`]);
      const r = spawnSync(process.execPath, [CLI, 'inspect', '--state', join(full, 'st.db')], { encoding: 'utf8' });
      expect(r.status).toBe(2);
      expect(r.stderr).toContain(`${join(full, 'st.db')}: cannot open the state database (`);
      expect(r.stderr).toContain('the disk holding it is full (no bytes free): free space there; the state is as it was');
    } finally {
      spawnSync('umount', [full]);
    }
  });
});
