/**
 * Durability of the JSON store: a child process writes a burst of acknowledged changes and is killed
 * with SIGKILL mid-burst; the store must then load, and hold every write that was acknowledged.
 *
 * The child runs the built store (dist/), like the real server does; this file rebuilds dist when it
 * is missing or older than the store's sources.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { JsonStore } from '../src/store/json-store.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const BUILT = join(ROOT, 'dist/src/store/json-store.js');
const CHILD = join(ROOT, 'test/fixtures/store-burst.mjs');
const SOURCES = ['src/errors.ts', 'src/store/json-store.ts', 'src/store/atomic-file.ts', 'src/store/schema.ts'];

function ensureBuilt(): void {
  const fresh = () => existsSync(BUILT) && SOURCES.every((f) => statSync(join(ROOT, f)).mtimeMs <= statSync(BUILT).mtimeMs);
  if (fresh()) return;
  try {
    execFileSync(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', join(ROOT, 'tsconfig.json')], { stdio: 'ignore' });
  } catch {
    // tsc exits non-zero on type errors elsewhere but still emits; freshness is checked below.
  }
  if (!fresh()) throw new Error(`${BUILT} is missing or stale: run npm run build`);
}

let dir: string;
beforeAll(async () => {
  ensureBuilt();
  dir = await mkdtemp(join(tmpdir(), 'treegate-store-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** Run the child until `killAfter` acknowledgements arrived, SIGKILL it, return the acknowledged lines. */
function burst(file: string, run: string, killAfter: number): Promise<string[]> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CHILD, file, run], { stdio: ['ignore', 'pipe', 'pipe'] });
    const acked: string[] = [];
    let buf = '';
    let stderr = '';
    let killed = false;
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`child too slow: ${acked.length} acks in 30 s; ${stderr}`));
    }, 30_000);
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.stdout.on('data', (d: Buffer) => {
      buf += d.toString();
      const lines = buf.split('\n');
      buf = lines.pop()!;
      for (const l of lines) if (l !== 'ready') acked.push(l);
      if (!killed && acked.length >= killAfter) {
        killed = true;
        child.kill('SIGKILL');
      }
    });
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      // Lines that were complete before the kill count; a partial last line does not.
      if (signal === 'SIGKILL') resolve(acked);
      else reject(new Error(`child exited by itself (code ${code}): ${stderr}`));
    });
  });
}

describe('JsonStore under kill -9', () => {
  it('keeps every acknowledged write across repeated kills mid-burst', async () => {
    const file = join(dir, 'store.json');
    const acked: string[] = [];
    for (const killAfter of [150, 301, 457]) {
      acked.push(...(await burst(file, `r${killAfter}`, killAfter)));
      // The file is whole JSON after every kill (never torn), and no temp file is left once opened.
      JSON.parse(await readFile(file, 'utf8'));
      const store = await JsonStore.open(file);
      try {
        const users = new Map((await store.users.list()).map((u) => [u.id, u.username]));
        const settings = await store.settings.all();
        const kv = new Map(await store.kv.entries<{ i: number }>('burst'));
        for (const line of acked) {
          const [kind, key, value] = line.split(' ');
          if (kind === 'user') expect(users.get(Number(key)), line).toBe(value);
          else if (kind === 'setting') expect(settings[key!], line).toBe(value);
          else if (kind === 'kv') expect(kv.get(key!)?.i, line).toBe(Number(value));
          else throw new Error(`unexpected line ${line}`);
        }
      } finally {
        await store.close();
      }
      expect((await readdir(dir)).filter((n) => n.endsWith('.tmp'))).toEqual([]);
    }
    expect(acked.length).toBeGreaterThanOrEqual(150 + 301 + 457);
  });
});
