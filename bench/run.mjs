// npm run bench: runs every benchmark script under bench/ in turn (each compares treegate with a
// reference server in the same run and prints ratios). Benchmarks are not tests: no asserts.
import { readdirSync } from 'node:fs';
import { spawnSync } from 'node:child_process';

const only = process.argv.slice(2);
const scripts = readdirSync(new URL('.', import.meta.url))
  .filter((f) => f.endsWith('.mjs') && f !== 'run.mjs')
  .filter((f) => only.length === 0 || only.some((o) => f.includes(o)))
  .sort();
let failed = 0;
for (const s of scripts) {
  console.log(`\n=== bench/${s} ===`);
  const r = spawnSync(process.execPath, [new URL(s, import.meta.url).pathname], { stdio: 'inherit' });
  if (r.status !== 0) failed++;
}
process.exit(failed ? 1 : 0);
