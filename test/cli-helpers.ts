import { runCli, type CliIo } from '../src/index.js';

export interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs the CLI in-process with captured output and an optional stdin. */
export async function cli(argv: string[], stdin = ''): Promise<CliRun> {
  let stdout = '';
  let stderr = '';
  const io: CliIo = {
    stdout: (t) => void (stdout += t),
    stderr: (t) => void (stderr += t),
    readStdin: async () => stdin,
    stderrIsTty: false,
  };
  const code = await runCli(argv, io);
  return { code, stdout, stderr };
}
