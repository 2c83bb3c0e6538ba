// Writes expected/ from the built CLI (dist/): run once, on the commit named in cases.mjs,
// with `npm run build && node test/golden/plans/generate.mjs`. Never run it to make a failing
// golden test pass: the point of the files is that they come from the code before the change.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { runCli } from '../../../dist/src/index.js';
import { cases, sha256, stateDump, states, writeInputs } from './cases.mjs';

const out = join(import.meta.dirname, 'expected');
mkdirSync(out, { recursive: true });
const dir = mkdtempSync(join(tmpdir(), 'rb-golden-'));
const io = { stdout: () => undefined, stderr: (t) => process.stderr.write(t), readStdin: async () => '', stderrIsTty: false };
try {
  writeInputs(dir);
  for (const [name, steps] of Object.entries(states)) {
    const db = join(dir, `${name}.db`);
    for (const [file, ...flags] of steps) {
      const code = await runCli(['observe', '--results', join(dir, file), '--state', db, ...flags], io);
      if (code !== 0) throw new Error(`observe ${file}: exit ${code}`);
    }
    writeFileSync(join(out, `state-${name}.json`), stateDump(Database, db));
  }
  for (const c of cases) {
    const argv = c.argv.map((a, k) => (c.argv[k - 1] === '--prompts' ? join(dir, a) : a));
    const path = join(dir, c.name);
    const code = await runCli(['plan', ...argv, '--state', join(dir, `${c.state}.db`), '--out', path], io);
    if (code !== 0) throw new Error(`${c.name}: exit ${code}`);
    const text = readFileSync(path, 'utf8');
    if (c.compare === 'text') writeFileSync(join(out, c.name), text);
    else writeFileSync(join(out, `${c.name}.sha256`), `${sha256(text)}\n`);
    console.log(`${c.name}: ${text.length} bytes`);
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
