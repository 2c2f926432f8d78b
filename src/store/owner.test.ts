/** DATA's owner claim (owner.ts): exclusive across processes, waiting for a CLI run, stale markers replaced. */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, readFile, rm, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { claimOwner, liveOwner, OWNER_FILE, OwnerBusyError } from './owner.js';

/** The built module (npm test builds first): the claimants must be separate processes. */
const OWNER_JS = resolve(import.meta.dirname, '../../dist/src/store/owner.js');

let dir: string;
const children: ChildProcess[] = [];
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'tg-owner-'));
});
afterEach(async () => {
  for (const c of children.splice(0)) c.kill('SIGKILL');
  await rm(dir, { recursive: true, force: true });
});

/** A process that says `ready`, claims DATA when told `go`, prints `won` or `busy`, and stays alive. */
function claimant(): { child: ChildProcess; lines: AsyncIterator<string> } {
  const code = `
    const { claimOwner, OwnerBusyError } = await import(${JSON.stringify(OWNER_JS)});
    process.stdin.once('data', async () => {
      try { await claimOwner(${JSON.stringify(dir)}, 'server', 0); console.log('won'); }
      catch (e) { console.log(e instanceof OwnerBusyError ? 'busy' : 'error ' + e.message); }
    });
    console.log('ready');`;
  const child = spawn(process.execPath, ['--input-type=module', '-e', code], { stdio: ['pipe', 'pipe', 'inherit'] });
  children.push(child);
  return { child, lines: createInterface({ input: child.stdout! })[Symbol.asyncIterator]() };
}

/** A live process that is not this one, to own markers written by the test. */
function sleeper(): number {
  const c = spawn('sleep', ['60']);
  children.push(c);
  return c.pid!;
}

describe('claimOwner', () => {
  it('lets exactly one of several processes claiming at the same moment win', async () => {
    const all = Array.from({ length: 6 }, claimant);
    for (const c of all) expect((await c.lines.next()).value).toBe('ready');
    for (const c of all) c.child.stdin!.write('go\n');
    const results = await Promise.all(all.map(async (c) => (await c.lines.next()).value as string));
    expect(results.filter((r) => r === 'won')).toHaveLength(1);
    expect(results.filter((r) => r === 'busy')).toHaveLength(5);
    const winner = all[results.indexOf('won')]!.child.pid;
    expect((await liveOwner(dir))?.pid).toBe(winner);
  });

  it('waits for a CLI run to finish, and refuses a live server at once', async () => {
    const file = join(dir, OWNER_FILE);
    await writeFile(file, JSON.stringify({ pid: sleeper(), start: null, instance: 'cli-run', kind: 'cli' }));
    const claim = claimOwner(dir, 'server', 30_000);
    let settled = false;
    void claim.then(() => (settled = true), () => (settled = true));
    await new Promise((r) => setTimeout(r, 300));
    expect(settled).toBe(false); // still waiting for the CLI
    await rm(file); // the CLI run releases
    const release = await claim;
    expect(JSON.parse(await readFile(file, 'utf8'))).toMatchObject({ pid: process.pid, kind: 'server' });
    await release();

    await writeFile(file, JSON.stringify({ pid: sleeper(), start: null, instance: 'cli-stuck', kind: 'cli' }));
    await expect(claimOwner(dir, 'server', 200)).rejects.toBeInstanceOf(OwnerBusyError); // not for ever
    const serverPid = sleeper();
    await writeFile(file, JSON.stringify({ pid: serverPid, start: null, instance: 'srv' })); // an older version's marker
    const t0 = Date.now();
    await expect(claimOwner(dir, 'cli', 30_000)).rejects.toMatchObject({ owner: { pid: serverPid } });
    expect(Date.now() - t0).toBeLessThan(10_000); // a server is not waited for
  });

  it('replaces a dead process\'s marker and one a crash left unreadable, but waits while one is being written', async () => {
    const file = join(dir, OWNER_FILE);
    const gone = spawn('true');
    await new Promise((r) => gone.once('exit', r));
    await writeFile(file, JSON.stringify({ pid: gone.pid, start: null, instance: 'dead', kind: 'server' }));
    await (await claimOwner(dir, 'server', 0))();

    await writeFile(file, ''); // a claim being written right now (no hard links on this file system)
    const claim = claimOwner(dir, 'server', 0);
    let settled = false;
    void claim.then(() => (settled = true), () => (settled = true));
    await new Promise((r) => setTimeout(r, 300));
    expect(settled).toBe(false);
    const old = new Date(Date.now() - 60_000);
    await utimes(file, old, old); // ... or left torn by a crash long ago
    const release = await claim;
    expect((await liveOwner(dir))?.pid).toBe(process.pid);
    await release();
    expect(await liveOwner(dir)).toBeUndefined();
  });
});
