/** Temp folders for the tests of one file: `make` creates one, `removeAll` (in afterAll) deletes them all. */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export function tempFolders(): { make(prefix: string): string; removeAll(): void } {
  const made: string[] = [];
  return {
    make(prefix) {
      const d = mkdtempSync(join(tmpdir(), prefix));
      made.push(d);
      return d;
    },
    removeAll() {
      for (const d of made.splice(0)) rmSync(d, { recursive: true, force: true });
    },
  };
}
