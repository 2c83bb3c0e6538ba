// Module hooks for test/cli-lazy.test.ts: print every module the process loads.
export async function load(url, context, next) {
  if (!url.startsWith('node:')) process.stderr.write(`LOADED ${url}\n`);
  return next(url, context);
}
