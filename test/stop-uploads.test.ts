/**
 * A graceful stop (SIGTERM) with an upload in flight, against the built CLI as a real process: the
 * upload is cut off after the drain and fails like any aborted upload, so the stop leaves no
 * `.treegate-upload-*` temp file and nothing under the final name; the exit is 0 and bounded.
 * One throttled upload per protocol: REST PUT /api/fs/put, WebDAV PUT, SFTP put (OpenSSH, -l).
 */
import type { ChildProcess } from 'node:child_process';
import { request } from 'node:http';
import { mkdtemp, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { cliEnv, startServerProcess, type ServerProcess } from './clients/process.js';
import { requireSftpTools, spawnSftp } from './clients/sftp.js';

const PASSWORD = 'stop-uploads-Secret1';
const SIZE = 50 << 20;
/** DRAIN_MS (src/server.ts) plus the few seconds a stop may take after it. */
const STOP_BOUND_MS = 10_000 + 8_000;

const dirs: string[] = [];
const procs: ServerProcess[] = [];
const clients: ChildProcess[] = [];
const stoppers: Array<() => void> = [];

afterEach(async () => {
  for (const s of stoppers.splice(0)) s();
  for (const c of clients.splice(0)) if (c.exitCode === null) c.kill('SIGKILL');
  for (const p of procs.splice(0)) if (p.child.exitCode === null) p.child.kill('SIGKILL');
  for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
});

async function start(): Promise<{ p: ServerProcess; data: string }> {
  const d = await mkdtemp(join(tmpdir(), 'treegate-stop-'));
  dirs.push(d);
  const data = join(d, 'data');
  const p = await startServerProcess(['--data', data], cliEnv({ TREEGATE_ADMIN_PASSWORD: PASSWORD }));
  procs.push(p);
  return { p, data };
}

const tempFiles = async (data: string) => (await readdir(join(data, 'storage'))).filter((n) => n.startsWith('.treegate-upload-'));

async function until(cond: () => Promise<boolean>, ms: number): Promise<boolean> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await cond()) return true;
    await new Promise((r) => setTimeout(r, 50));
  }
  return false;
}

/** A PUT whose body trickles out at ~2 MB/s (64 KiB every 32 ms) until it is sent or the server cuts it. */
function slowPut(port: number, path: string, headers: Record<string, string>): void {
  const req = request({ host: '127.0.0.1', port, method: 'PUT', path, headers: { ...headers, 'content-length': String(SIZE) } });
  req.on('error', () => undefined);
  req.on('response', (res) => res.resume());
  const chunk = Buffer.alloc(64 << 10, 7);
  let sent = 0;
  const timer = setInterval(() => {
    if (req.destroyed || sent >= SIZE) return clearInterval(timer);
    req.write(chunk);
    sent += chunk.length;
    if (sent >= SIZE) req.end();
  }, 32);
  stoppers.push(() => {
    clearInterval(timer);
    req.destroy();
  });
}

/** SIGTERM once the upload's temp file exists; the exit code and how long the stop took. */
async function stopMidUpload(p: ServerProcess, data: string): Promise<{ code: number | null; ms: number }> {
  expect(await until(async () => (await tempFiles(data)).length > 0, 20_000), p.output()).toBe(true);
  await new Promise((r) => setTimeout(r, 1000)); // some megabytes in
  const t0 = Date.now();
  p.child.kill('SIGTERM');
  const code = await p.exited;
  return { code, ms: Date.now() - t0 };
}

async function expectNothingLeft(data: string, name: string): Promise<void> {
  expect(await tempFiles(data)).toEqual([]);
  await expect(stat(join(data, 'storage', name))).rejects.toThrow();
}

describe('SIGTERM with an upload in flight leaves nothing behind', () => {
  it('REST PUT /api/fs/put', async () => {
    const { p, data } = await start();
    const login = await fetch(`http://127.0.0.1:${p.http}/api/auth/login`, {
      method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ username: 'admin', password: PASSWORD }),
    });
    const token = ((await login.json()) as { data: { token: string } }).data.token;
    slowPut(p.http, '/api/fs/put', { authorization: token, 'file-path': '/rest.bin' });
    const { code, ms } = await stopMidUpload(p, data);
    expect(code, p.output()).toBe(0);
    expect(ms).toBeLessThan(STOP_BOUND_MS);
    await expectNothingLeft(data, 'rest.bin');
  }, 90_000);

  it('WebDAV PUT', async () => {
    const { p, data } = await start();
    slowPut(p.http, '/dav/dav.bin', { authorization: 'Basic ' + Buffer.from(`admin:${PASSWORD}`).toString('base64') });
    const { code, ms } = await stopMidUpload(p, data);
    expect(code, p.output()).toBe(0);
    expect(ms).toBeLessThan(STOP_BOUND_MS);
    await expectNothingLeft(data, 'dav.bin');
  }, 90_000);

  it('SFTP put (OpenSSH sftp -l)', async () => {
    requireSftpTools();
    const { p, data } = await start();
    const local = join(dirs[0]!, 'big.bin');
    await writeFile(local, Buffer.alloc(SIZE, 7));
    // -l is in Kbit/s: about 2 MB/s.
    const child = await spawnSftp({ port: p.sftp, user: 'admin', password: PASSWORD, args: ['-l', '16000'] }, [`put ${local} /sftp.bin`]);
    clients.push(child);
    const { code, ms } = await stopMidUpload(p, data);
    expect(code, p.output()).toBe(0);
    expect(ms).toBeLessThan(STOP_BOUND_MS);
    await expectNothingLeft(data, 'sftp.bin');
  }, 90_000);
});
