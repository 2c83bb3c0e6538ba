/**
 * Loaded into a measured child process by `npm run bench` (node --import): prints the
 * process's peak resident memory at exit, on stderr, as `BENCH_RSS <bytes>`.
 */
process.on('exit', () => {
  process.stderr.write(`\nBENCH_RSS ${process.resourceUsage().maxRSS * 1024}\n`);
});
