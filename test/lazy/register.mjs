// For test/cli-lazy.test.ts: list the ES modules a process loads (hooks.mjs) and, at exit,
// the CommonJS ones (loaded through require, which the hooks do not see).
import { createRequire, register } from 'node:module';
import { pathToFileURL } from 'node:url';

register('./hooks.mjs', import.meta.url);
const require = createRequire(import.meta.url);
process.on('exit', () => {
  for (const path of Object.keys(require.cache)) process.stderr.write(`LOADED ${pathToFileURL(path).href}\n`);
});
