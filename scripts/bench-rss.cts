/**
 * Loaded into a measured child process by `npm run bench` (node -r): prints the
 * process's peak resident memory at exit, on stderr, as `BENCH_RSS <bytes>`. Linux's
 * VmHWM (/proc/self/status) is the peak of this program's own memory; getrusage's maxRSS
 * would also count the parent's memory at fork (it survives the exec). CommonJS (.cts), so
 * preloading it costs the child about 4 ms; an ES module with --import started Node's module
 * loader first, 10-12 ms a run that the CLI itself never spends.
 */
import { readFileSync } from 'node:fs';

function peakRss(): number {
  try {
    const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync('/proc/self/status', 'utf8'));
    if (m !== null) return Number(m[1]) * 1024;
  } catch {
    // not Linux
  }
  return process.resourceUsage().maxRSS * 1024;
}

process.on('exit', () => {
  process.stderr.write(`\nBENCH_RSS ${peakRss()}\n`);
});
