// Preloaded (-r) by test/cli-lazy.test.ts: prints the public built-in modules the process
// loaded (process.moduleLoadList, Node's own record), at exit, on stderr.
'use strict';
process.on('exit', () => {
  const names = process.moduleLoadList.filter((m) => m.startsWith('NativeModule ') && !m.startsWith('NativeModule internal/')).map((m) => m.slice('NativeModule '.length));
  require('node:fs').writeSync(2, `BUILTINS ${names.join(',')}\n`); // not process.stderr: making it loads modules
});
