/**
 * The dependency rules of docs/architecture.md, enforced by reading imports:
 * - drivers/* import only drivers/types.ts, src/errors.ts and src/paths.ts (the conformance suite,
 *   a test tool, may also use src/vfs/link.ts to read links and src/vfs/testing.ts to run a case
 *   through the VFS over the driver under test);
 * - the core (src/) never imports a protocol adapter, except the composition root src/server.ts;
 * - a protocol adapter imports the core, never another protocol and never a concrete driver;
 *   files directly in protocols/ are helpers shared by the adapters (no adapter's code);
 * - no module-level `let` in src/ and drivers/ (state lives in objects built by the server).
 */
import { readdir, readFile } from 'node:fs/promises';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(import.meta.dirname, '..');

async function sources(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const e of await readdir(join(ROOT, dir), { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) out.push(...(await sources(p)));
    else if (e.name.endsWith('.ts') && !e.name.endsWith('.test.ts')) out.push(p);
  }
  return out;
}

/** Repo-relative paths of every relative import of a file. */
async function importsOf(file: string): Promise<string[]> {
  const text = await readFile(join(ROOT, file), 'utf8');
  const specs = [...text.matchAll(/(?:import|export)[^'"]*?from\s+['"](\.[^'"]+)['"]|import\(\s*['"](\.[^'"]+)['"]\s*\)/g)].map((m) => m[1] ?? m[2]!);
  return specs.map((s) => relative(ROOT, resolve(ROOT, dirname(file), s)).replace(/\.js$/, '.ts'));
}

describe('architecture', () => {
  it('drivers depend only on the driver contract, errors, paths, content headers and the addon loader', async () => {
    // Leaf modules of the core: they import nothing of it.
    const allowed = new Set(['drivers/types.ts', 'src/errors.ts', 'src/paths.ts', 'src/content-headers.ts', 'src/whole-body.ts', 'src/native-addon.ts']);
    const bad: string[] = [];
    for (const f of await sources('drivers')) {
      for (const i of await importsOf(f)) {
        const testTool = f.startsWith('drivers/conformance/') && (i === 'src/vfs/link.ts' || i === 'src/vfs/testing.ts');
        const ok = i.startsWith('drivers/') || allowed.has(i) || testTool;
        if (!ok) bad.push(`${f} -> ${i}`);
      }
    }
    expect(bad).toEqual([]);
  });

  it('the core never imports a protocol adapter (except the composition root)', async () => {
    const bad: string[] = [];
    for (const f of await sources('src')) {
      if (f === 'src/server.ts') continue;
      for (const i of await importsOf(f)) if (i.startsWith('protocols/')) bad.push(`${f} -> ${i}`);
    }
    expect(bad).toEqual([]);
  });

  it('protocol adapters use the core only: no other protocol, no concrete driver', async () => {
    const bad: string[] = [];
    for (const f of await sources('protocols')) {
      const own = f.split('/').slice(0, 2).join('/');
      for (const i of await importsOf(f)) {
        const shared = /^protocols\/[^/]+\.ts$/.test(i);
        if (i.startsWith('protocols/') && !i.startsWith(own + '/') && !shared) bad.push(`${f} -> ${i}`);
        if (i.startsWith('drivers/') && i !== 'drivers/types.ts') bad.push(`${f} -> ${i}`);
      }
    }
    expect(bad).toEqual([]);
  });

  it('keeps no module-level mutable state in the core and the drivers', async () => {
    const bad: string[] = [];
    for (const f of [...(await sources('src')), ...(await sources('drivers'))]) {
      const text = await readFile(join(ROOT, f), 'utf8');
      text.split('\n').forEach((line, n) => {
        if (/^(export )?(let|var) /.test(line)) bad.push(`${f}:${n + 1}: ${line.trim()}`);
      });
    }
    expect(bad).toEqual([]);
  });

  it('keeps source files under the hard limit of 500 lines', async () => {
    const bad: string[] = [];
    for (const f of [...(await sources('src')), ...(await sources('drivers')), ...(await sources('protocols'))]) {
      const lines = (await readFile(join(ROOT, f), 'utf8')).split('\n').length;
      if (lines > 500) bad.push(`${f}: ${lines} lines`);
    }
    expect(bad).toEqual([]);
  });
});
