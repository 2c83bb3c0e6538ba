import type { CliIo } from './io.js';

/**
 * A progress bar on stderr, drawn only when stderr is a terminal, not --quiet, and the run has
 * lasted more than `after` ms (io.progressAfterMs, else 2 s: short runs stay silent). Redrawn
 * at most every 100 ms.
 */
export function createProgress(io: CliIo, quiet: boolean, label: string, after = io.progressAfterMs ?? 2000, now: () => number = Date.now) {
  const enabled = io.stderrIsTty && !quiet;
  const start = now();
  let last = 0;
  let drawn = false;
  return {
    update(done: number, total: number): void {
      if (!enabled) return;
      const t = now();
      if (t - start < after || (t - last < 100 && done < total)) return;
      last = t;
      const share = total > 0 ? Math.min(1, done / total) : 1;
      const width = 30;
      const fill = Math.round(share * width);
      io.stderr(`\r${label} [${'#'.repeat(fill)}${'.'.repeat(width - fill)}] ${(share * 100).toFixed(0).padStart(3)}%`);
      drawn = true;
    },
    finish(): void {
      if (drawn) io.stderr('\n');
      drawn = false;
    },
  };
}
