/** The signals that ask a long-running command to stop: Ctrl-C, and a scheduler's SIGTERM. */
export type StopSignalName = 'SIGINT' | 'SIGTERM';

/**
 * Waits for the first SIGINT or SIGTERM. Both handlers go away with it, so a second signal
 * has Node's default and quits at once; `dispose()` removes them when none came. `stopped`
 * resolves with the signal's name, `signal` is aborted by it, and `received()` names it
 * (undefined until then). `serve`, `sim-server`, `execute` and `loop` stop through it.
 */
export function stopSignals(onStop?: (name: StopSignalName) => void): {
  stopped: Promise<StopSignalName>;
  signal: AbortSignal;
  received(): StopSignalName | undefined;
  dispose(): void;
} {
  const controller = new AbortController();
  let received: StopSignalName | undefined;
  let resolve: (name: StopSignalName) => void = () => undefined;
  const stopped = new Promise<StopSignalName>((r) => (resolve = r));
  const on = (name: StopSignalName) => () => {
    dispose();
    received = name;
    onStop?.(name);
    controller.abort();
    resolve(name);
  };
  const handlers = { SIGINT: on('SIGINT'), SIGTERM: on('SIGTERM') };
  const dispose = () => {
    process.off('SIGINT', handlers.SIGINT);
    process.off('SIGTERM', handlers.SIGTERM);
  };
  process.on('SIGINT', handlers.SIGINT);
  process.on('SIGTERM', handlers.SIGTERM);
  return { stopped, signal: controller.signal, received: () => received, dispose };
}
