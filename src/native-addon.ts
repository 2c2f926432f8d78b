/**
 * Loading the optional native addons (native/*, built by `npm run build` on Linux). Each is an
 * optimisation with a pure-JS fallback: missing, not Linux, or built for another Node ABI, the
 * caller gets undefined and does without.
 */
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

/** native/NAME's addon, looked for beside the package root whether running from src/ or dist/src/. */
export function loadNativeAddon<T>(name: string): T | undefined {
  if (process.platform !== 'linux') return undefined;
  for (let dir = import.meta.dirname, i = 0; i < 4; i++, dir = dirname(dir)) {
    const file = join(dir, `native/${name}/build/Release/${name}.node`);
    if (!existsSync(file)) continue;
    try {
      return createRequire(import.meta.url)(file) as T;
    } catch {
      return undefined;
    }
  }
  return undefined;
}
