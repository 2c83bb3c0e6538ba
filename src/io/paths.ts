import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The package's root (the folder holding package.json), from src/ or dist/src/ alike. */
export function packageRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, 'package.json'))) {
    const up = dirname(dir);
    if (up === dir) throw new Error('package.json not found above the module');
    dir = up;
  }
  return dir;
}

/** A file shipped in fixtures/. */
export function fixturePath(...parts: string[]): string {
  return join(packageRoot(), 'fixtures', ...parts);
}
