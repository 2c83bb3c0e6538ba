import { renameSync, writeFileSync } from 'node:fs';
import { RolloutBudgetError } from '../errors.js';
import { readText } from '../io/jsonl.js';
import { decodeUtf8 } from '../io/utf8.js';

/** Everything the CLI touches outside itself, so tests run it in-process. */
export interface CliIo {
  stdout(text: string): void;
  stderr(text: string): void;
  readStdin(): Promise<string>;
  /** True when stderr is a terminal (progress bars). */
  readonly stderrIsTty: boolean;
  /** How long a run lasts before its progress bar draws, in ms (default 2000; tests set 0). */
  readonly progressAfterMs?: number;
}

export const processIo: CliIo = {
  stdout: (text) => void process.stdout.write(text),
  stderr: (text) => void process.stderr.write(text),
  readStdin: async () => {
    const chunks: Buffer[] = [];
    for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
    return decodeUtf8(Buffer.concat(chunks), '<stdin>');
  },
  stderrIsTty: Boolean(process.stderr.isTTY),
};

/** Reads a path, or stdin for '-'. Returns the text and the name errors should use. */
export async function readInput(io: CliIo, path: string): Promise<{ text: string; name: string }> {
  if (path === '-') return { text: await io.readStdin(), name: '<stdin>' };
  return { text: readText(path), name: path };
}

/** Writes to stdout for '-', else atomically (temp file + rename): never a partial file. */
export function writeOutput(io: CliIo, path: string, text: string): void {
  if (path === '-') {
    io.stdout(text);
    return;
  }
  const tmp = `${path}.tmp-${process.pid}`;
  try {
    writeFileSync(tmp, text);
    renameSync(tmp, path);
  } catch (error) {
    throw new RolloutBudgetError('IO_ERROR', `${path}: cannot write (${(error as NodeJS.ErrnoException).code ?? String(error)})`);
  }
}
