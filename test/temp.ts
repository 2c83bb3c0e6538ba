import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { onTestFinished } from 'vitest';

/**
 * Temp folders for tests, removed without each test having to remember.
 *
 * `tempDir('rb-x-')` makes a fresh folder under `os.tmpdir()`. Called inside a test, the
 * folder is removed when that test finishes (passed or failed); called anywhere else (at the
 * top of a file, in a `describe` body, in a `beforeAll`/`beforeEach`), it is removed after the
 * file's last test, by `test/setup/temp-check.ts`, which then checks that the file left nothing
 * else in its temp folder. `os.tmpdir()` there is a folder of this run (`test/setup/temp-run.ts`
 * points TMPDIR at it), so whatever a test or a process it starts writes to the temp dir is
 * caught and named, and runs of other jobs on the same machine are never looked at.
 */
export function tempDir(prefix = 'rb-test-'): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  try {
    onTestFinished(() => removeDir(dir));
  } catch {
    // outside a running test: kept until the file ends
  }
  fileDirs.push(dir);
  return dir;
}

/** Folders made by `tempDir` in this file so far; emptied by `removeFileDirs`. */
const fileDirs: string[] = [];

function removeDir(dir: string): void {
  rmSync(dir, { recursive: true, force: true, maxRetries: 3 });
}

/** Removes every folder `tempDir` made in this file (the setup file calls it after the file's tests). */
export function removeFileDirs(): void {
  for (const dir of fileDirs.splice(0)) removeDir(dir);
}
