import { spawn, spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readFileSync, utimesSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CLI, ROOT } from './service-helpers.js';
import { tempDir } from './temp.js';

/**
 * The bin runs the CLI from a one-file bundle with a code cache (scripts/bundle-cli.ts,
 * bin/load-bundle.js), else from the compiled ES modules. Both must behave the same, the
 * cache must never be used for a bundle it was not made for, and a bundle older than the
 * modules (a `tsc` run on its own since) must not be run.
 */
const BUNDLE = join(ROOT, 'dist', 'cli', 'rollout-budget.cjs');
const MODULES_CLI = join(ROOT, 'test', 'lazy', 'modules-cli.mjs');
const loader = createRequire(import.meta.url)(join(ROOT, 'bin', 'load-bundle.js')) as {
  loadBundle(path: string): { exports: { runCli(argv: string[], io: unknown): Promise<number> }; script: { cachedDataRejected?: boolean } };
  cachePath(path: string): string;
};

function run(cli: string, args: string[], cwd: string) {
  const r = spawnSync(process.execPath, [cli, ...args], { encoding: 'utf8', cwd });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe('the CLI bundle', () => {
  it('npm run build made the bundle and its code cache', () => {
    expect(existsSync(BUNDLE), `${BUNDLE} is missing: run npm run build`).toBe(true);
    expect(existsSync(loader.cachePath(BUNDLE))).toBe(true);
  });

  it('the bundle is ASCII: V8 keeps it as a one-byte string (a regular expression spells a non-ASCII character as an escape)', () => {
    const bytes = readFileSync(BUNDLE);
    const at = bytes.findIndex((b) => b >= 0x80);
    expect(at, at < 0 ? '' : `non-ASCII byte at ${at}: ${bytes.subarray(Math.max(0, at - 40), at + 10).toString('utf8')}`).toBe(-1);
  });

  it('runs as the ES modules do: help, a plan byte for byte, a bad input\'s message and exit code', () => {
    const dir = tempDir('rb-bundle-');
    writeFileSync(join(dir, 'p.jsonl'), Array.from({ length: 50 }, (_, i) => `{"id":"p${i}","prompt_tokens":${10 + i},"max_tokens":2048}`).join('\n'));
    writeFileSync(join(dir, 'bad.jsonl'), '{"id":"a"}\n{"id":"b","max_tokens":-3}\n');
    const cases = [
      ['--help'],
      ['plan', '--help'],
      ['plan', '--prompts', 'p.jsonl', '--state', ':memory:', '--budget-rollouts', '400', '--out', '-'],
      ['plan', '--prompts', 'p.jsonl', '--state', ':memory:', '--budget-rollouts', '400', '--format', 'jsonl', '--out', '-'],
      ['plan', '--prompts', 'bad.jsonl', '--state', ':memory:', '--budget-rollouts', '400', '--out', '-'],
      ['plan', '--prompts', 'p.jsonl', '--state', ':memory:', '--budget-rollouts', '400', '--decay', '2'],
      ['nonsense'],
    ];
    for (const args of cases) {
      const bundled = run(CLI, args, dir);
      expect(bundled, args.join(' ')).toEqual(run(MODULES_CLI, args, dir));
    }
    expect(run(CLI, cases[4]!, dir)).toMatchObject({ code: 2, stderr: expect.stringContaining('bad.jsonl:2') });
  });

  it('uses the code cache made for this bundle, and ignores one made for another build', async () => {
    expect(loader.loadBundle(BUNDLE).script.cachedDataRejected).toBe(false);
    const dir = tempDir('rb-bundle-');
    const other = join(dir, 'rollout-budget.cjs');
    const source = readFileSync(BUNDLE, 'utf8');
    const id = /^\/\/ rollout-budget bundle (\w+)\n/.exec(source)![1]!;
    // Same length, another build: V8 alone would take the cache (it checks the length, not the text).
    writeFileSync(other, source.replace(id, id.replace(/./g, (c) => (c === '0' ? '1' : '0'))));
    copyFileSync(loader.cachePath(BUNDLE), loader.cachePath(other));
    const loaded = loader.loadBundle(other);
    expect(loaded.script.cachedDataRejected).toBeUndefined(); // compiled from source, no cache offered
    let out = '';
    const io = { stdout: (t: string) => void (out += t), stderr: () => undefined, readStdin: async () => '', stderrIsTty: false };
    expect(await loaded.exports.runCli(['--version'], io)).toBe(0);
    expect(out).toBe('0.1.0\n');
  });

  it('the bin runs the bundle only when it is at least as new as the modules', () => {
    // A stand-in package: a bundle and a modules entry that each say which ran.
    const root = tempDir('rb-bundle-');
    mkdirSync(join(root, 'bin'));
    for (const f of ['rollout-budget.js', 'load-bundle.js', 'package.json']) copyFileSync(join(ROOT, 'bin', f), join(root, 'bin', f));
    mkdirSync(join(root, 'dist', 'cli'), { recursive: true });
    mkdirSync(join(root, 'dist', 'src', 'cli'), { recursive: true });
    const bundle = join(root, 'dist', 'cli', 'rollout-budget.cjs');
    const modules = join(root, 'dist', 'src', 'cli', 'main.js');
    writeFileSync(modules, 'export async function runCli(argv) { process.stdout.write(`modules ${argv.join(" ")}\\n`); return 3; }\n');
    const bin = join(root, 'bin', 'rollout-budget.js');
    expect(run(bin, ['x'], root)).toMatchObject({ code: 3, stdout: 'modules x\n' }); // no bundle
    writeFileSync(bundle, '// rollout-budget bundle abc\nexports.runCli = async (argv) => { process.stdout.write(`bundle ${argv.join(" ")}\\n`); return 4; };\n');
    const t = Date.now() / 1000;
    utimesSync(modules, t - 10, t - 10);
    utimesSync(bundle, t, t);
    expect(run(bin, ['y'], root)).toMatchObject({ code: 4, stdout: 'bundle y\n' });
    utimesSync(modules, t + 10, t + 10); // tsc ran after the bundle was made
    expect(run(bin, ['z'], root)).toMatchObject({ code: 3, stdout: 'modules z\n' });
  });

  it('the bin of a clone not built yet says what to run, not Node\'s module-not-found stack', () => {
    const root = tempDir('rb-bundle-');
    mkdirSync(join(root, 'bin'));
    for (const f of ['rollout-budget.js', 'load-bundle.js', 'package.json']) copyFileSync(join(ROOT, 'bin', f), join(root, 'bin', f));
    const r = run(join(root, 'bin', 'rollout-budget.js'), ['--help'], root);
    expect(r).toMatchObject({ code: 2, stdout: '' });
    expect(r.stderr).toBe(`rollout-budget: not built yet (no ${join(root, 'dist', 'src', 'cli', 'main.js')}): run \`npm run build\` (or \`npm start\`) in ${root} first\n`);
    // A module missing inside a build (not the entry itself) is still Node's own error.
    mkdirSync(join(root, 'dist', 'src', 'cli'), { recursive: true });
    writeFileSync(join(root, 'dist', 'src', 'cli', 'main.js'), "export { runCli } from './gone.js';\n");
    const broken = run(join(root, 'bin', 'rollout-budget.js'), ['--help'], root);
    expect(broken.code).not.toBe(0);
    expect(broken.stderr).toContain('ERR_MODULE_NOT_FOUND');
  });

  it('the bin ends the process once the command returns, but not before a reader behind on stdout has it all', async () => {
    const dir = tempDir('rb-bundle-');
    writeFileSync(join(dir, 'p.jsonl'), Array.from({ length: 20_000 }, (_, i) => `{"id":"p${i}","prompt_tokens":${10 + (i % 90)},"max_tokens":2048}`).join('\n'));
    // Says on stderr whether Node's own end ran ('beforeExit' runs there, not on process.exit).
    const hook = join(dir, 'hook.cjs');
    writeFileSync(hook, "process.on('beforeExit', () => require('node:fs').writeSync(2, 'NODE-END\\n'));\n");
    const plan = ['plan', '--prompts', 'p.jsonl', '--state', ':memory:', '--budget-rollouts', '160000'];
    const env = { ...process.env, NODE_OPTIONS: `--require ${hook}` };
    const toFile = spawnSync(process.execPath, [CLI, ...plan, '--out', 'plan.json'], { cwd: dir, env, encoding: 'utf8' });
    expect(toFile.status, toFile.stderr).toBe(0);
    expect(toFile.stderr).not.toContain('NODE-END'); // nothing left: ended at once
    const bytes = readFileSync(join(dir, 'plan.json'));
    expect(bytes.length).toBeGreaterThan(1 << 20); // far more than a pipe holds
    // stdout read only after a while: the plan waits in the process, which must not end before it is written.
    const child = spawn(process.execPath, [CLI, ...plan, '--out', '-'], { cwd: dir, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => void (stderr += d.toString()));
    const closed = new Promise((resolve) => child.on('close', resolve));
    await new Promise((resolve) => setTimeout(resolve, 1500));
    const chunks: Buffer[] = [];
    child.stdout.on('data', (d: Buffer) => chunks.push(d));
    expect(await closed, stderr).toBe(0);
    expect(Buffer.concat(chunks).equals(bytes)).toBe(true);
    expect(stderr).toContain('NODE-END');
  });

  it('--help does not load node:child_process (commander requires it on first use only), and commander still reaches it', () => {
    // The built-in modules a process loaded, listed at its exit.
    const builtins = (setup: string) => {
      const r = spawnSync(process.execPath, ['-e', `${setup}; process.on('exit', () => process.stderr.write(JSON.stringify(process.moduleLoadList)))`], { encoding: 'utf8' });
      expect(r.status, r.stderr).toBe(0);
      return JSON.parse(r.stderr) as string[];
    };
    const bin = JSON.stringify(join(ROOT, 'bin', 'rollout-budget.js'));
    const help = builtins(`process.argv = [process.argv[0], ${bin}, '--help']; process.stdout.write = () => true; require(${bin})`);
    expect(help).toContain('NativeModule internal/fs/utils'); // the list is what it says
    expect(help.filter((m) => m.includes('child_process'))).toEqual([]);
    // commander's executable subcommands (none here) spawn through a stand-in that requires the real module.
    expect(readFileSync(BUNDLE, 'utf8')).toMatch(/real ?\?\?= ?require\("node:child_process"\)/);
  });
});
