/** treegate's version: package.json's, read once (also the `version` public setting). */
import { readFileSync } from 'node:fs';

function findVersion(): string {
  // src/version.ts runs from src/ (tests) or dist/src/ (built): try both depths.
  for (const rel of ['../package.json', '../../package.json']) {
    try {
      const pkg = JSON.parse(readFileSync(new URL(rel, import.meta.url), 'utf8')) as { name?: string; version?: string };
      if (pkg.name === 'treegate' && pkg.version) return pkg.version;
    } catch {
      // try the next location
    }
  }
  return 'dev';
}

export const VERSION = findVersion();
