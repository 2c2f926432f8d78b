#!/usr/bin/env node
/**
 * Builds the native addons (native/*) with node-gyp, the one npm ships, when their sources are newer
 * than the build. Run by `npm run build` (so by `npm start` and `npm test`).
 *
 * An addon is an optimisation with a pure-JS fallback (see each addon's source), so a failed build
 * warns and carries on: the server still serves. On Linux the test suite checks that it was built.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';

const root = resolve(import.meta.dirname, '..');
// npm tells its scripts where its node-gyp is; otherwise it sits beside npm, next to node.
const nodeGyp = [process.env.npm_config_node_gyp, join(dirname(process.execPath), '../lib/node_modules/npm/node_modules/node-gyp/bin/node-gyp.js')].find(
  (p) => p && existsSync(p),
);

// node-gyp downloads Node's headers unless told where they are: use the running Node's own (a
// Node install has them in PREFIX/include/node) when npm has not named a nodedir.
const prefix = resolve(dirname(process.execPath), '..');
const nodedir = !process.env.npm_config_nodedir && existsSync(join(prefix, 'include/node/node_version.h')) ? [`--nodedir=${prefix}`] : [];

for (const name of readdirSync(join(root, 'native'))) {
  const dir = join(root, 'native', name);
  const built = join(dir, 'build/Release', `${name}.node`);
  const sources = readdirSync(dir).filter((f) => /\.(c|cc|h|gyp)$/.test(f));
  if (existsSync(built) && sources.every((f) => statSync(join(dir, f)).mtimeMs <= statSync(built).mtimeMs)) continue;
  if (process.platform !== 'linux') continue; // the addons are Linux-only; elsewhere the fallbacks serve
  const r = nodeGyp ? spawnSync(process.execPath, [nodeGyp, 'rebuild', '--silent', ...nodedir], { cwd: dir, stdio: 'inherit' }) : { status: -1 };
  if (r.status === 0) console.log(`native/${name}: built`);
  else console.warn(`native/${name}: not built (${nodeGyp ? `node-gyp exited ${r.status}` : 'node-gyp not found'}); treegate runs without it, more slowly`);
}
