import { describe, expect, it } from 'vitest';
import { stopSignals } from '../src/cli/signals.js';

/**
 * The one stop-signal helper of `serve`, `sim-server`, `execute` and `loop` (src/cli/signals.ts).
 * Signals are emitted to this process's listeners only (process.emit): no real signal is sent.
 */
describe('stopSignals', () => {
  it('the first SIGINT or SIGTERM stops, and takes both handlers away, so a second one has Node\'s default (quit at once)', async () => {
    for (const sig of ['SIGINT', 'SIGTERM'] as const) {
      const before = { SIGINT: process.listenerCount('SIGINT'), SIGTERM: process.listenerCount('SIGTERM') };
      const seen: string[] = [];
      const stop = stopSignals((name) => seen.push(name));
      expect(process.listenerCount('SIGINT')).toBe(before.SIGINT + 1);
      expect(process.listenerCount('SIGTERM')).toBe(before.SIGTERM + 1);
      expect(stop.received()).toBeUndefined();
      expect(stop.signal.aborted).toBe(false);
      process.emit(sig);
      expect(await stop.stopped).toBe(sig);
      expect(stop.received()).toBe(sig);
      expect(stop.signal.aborted).toBe(true);
      expect(seen).toEqual([sig]);
      expect(process.listenerCount('SIGINT')).toBe(before.SIGINT);
      expect(process.listenerCount('SIGTERM')).toBe(before.SIGTERM);
    }
  });

  it('dispose() without a signal takes both handlers away', () => {
    const before = process.listenerCount('SIGINT') + process.listenerCount('SIGTERM');
    const stop = stopSignals();
    stop.dispose();
    expect(process.listenerCount('SIGINT') + process.listenerCount('SIGTERM')).toBe(before);
    expect(stop.received()).toBeUndefined();
  });
});
