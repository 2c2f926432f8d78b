import { execFile } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { promisify } from 'node:util';
import type { SFTPWrapper } from 'ssh2';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseOptions } from '../options.js';
import { runConformance } from '../conformance/suite.js';
import { codeOf, names, NO_ARGS, rootObj } from '../conformance/helpers.js';
import type { Driver, DriverDefinition } from '../types.js';
import { cutProxy, freePort, initAgainstMuteServer } from '../testing/process.js';
import { startSshd, type Sshd } from '../testing/sshd.js';
import { sftpDefinition } from './index.js';

const def = sftpDefinition as unknown as DriverDefinition;
const log = pino({ level: 'silent' });
const run = promisify(execFile);

/** The driver's connection (SftpDriver.conn), to shorten its request deadline or reach its channel. */
interface ConnInternals { requestTimeoutMs: number; get(): Promise<{ sftp: SFTPWrapper }> }
const connOf = (d: Driver) => (d as unknown as { conn: ConnInternals }).conn;

/** `p`, or a rejection after `ms`: a test that would hang fails instead. */
function within<T>(p: Promise<T>, ms: number): Promise<T> {
  let t: NodeJS.Timeout | undefined;
  return Promise.race([p, new Promise<never>((_, reject) => { t = setTimeout(() => reject(new Error(`no answer in ${ms} ms`)), ms); })])
    .finally(() => clearTimeout(t));
}

/** PIDs of the test sshd's `user@internal-sftp` processes (one per open SFTP channel). */
async function sftpProcesses(rootPid: number): Promise<number[]> {
  const { stdout } = await run('ps', ['-eo', 'pid=,ppid=,args=']);
  const rows = stdout.trim().split('\n').map((l) => /^\s*(\d+)\s+(\d+)\s+(.*)$/.exec(l)!).map((m) => ({ pid: +m[1]!, ppid: +m[2]!, args: m[3]! }));
  const tree = new Set([rootPid]);
  for (let grew = true; grew;) {
    grew = false;
    for (const r of rows) if (tree.has(r.ppid) && !tree.has(r.pid)) { tree.add(r.pid); grew = true; }
  }
  return rows.filter((r) => tree.has(r.pid) && /@internal-sftp/.test(r.args)).map((r) => r.pid);
}

const codeOfError = (e: unknown) => (e as { code?: unknown } | undefined)?.code;
const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');

describe('SFTP driver against OpenSSH sshd', () => {
  let sshd: Sshd;
  beforeAll(async () => { sshd = await startSshd(); });
  afterAll(async () => { await sshd?.stop(); });

  const optionsFor = (extra: Record<string, unknown> = {}) => parseOptions(def, {
    address: `127.0.0.1:${sshd.port}`, username: sshd.user, private_key: sshd.privateKey, root_folder_path: sshd.dataDir, ...extra,
  });

  runConformance(def, async () => ({ options: optionsFor(), cleanup: async () => undefined }));

  it('reconnects after the server drops the connection', async () => {
    const proxy = await cutProxy(sshd.port);
    const d = await def.create(optionsFor({ address: `127.0.0.1:${proxy.port}` }), { log, dataDir: '/x' }) as Required<Driver>;
    try {
      await d.init(AbortSignal.timeout(10_000));
      await d.put(rootObj, Readable.from([Buffer.from('still here')]), { name: 'reconnect.txt' });
      proxy.cut();
      await new Promise((r) => setTimeout(r, 100));
      expect(await names(d, '/')).toContain('reconnect.txt');
      proxy.cut();
      expect((await d.get('/reconnect.txt', NO_ARGS)).size).toBe(10);
      await d.remove(await d.get('/reconnect.txt', NO_ARGS), NO_ARGS);
    } finally {
      await d.drop();
      await proxy.close();
    }
  });

  it('fails init clearly: wrong password, dead port, missing root, an abort while the server says nothing', async () => {
    const bad = await def.create(optionsFor({ private_key: '', password: 'wrong-password' }), { log, dataDir: '/x' });
    await expect(bad.init(AbortSignal.timeout(10_000))).rejects.toThrow(/authentication failed for user/);
    const dead = await def.create(optionsFor({ address: `127.0.0.1:${await freePort()}` }), { log, dataDir: '/x' });
    await expect(dead.init(AbortSignal.timeout(10_000))).rejects.toThrow(/ECONNREFUSED/);
    const missing = await def.create(optionsFor({ root_folder_path: join(sshd.dataDir, 'nope') }), { log, dataDir: '/x' });
    await expect(missing.init(AbortSignal.timeout(10_000))).rejects.toThrow(/root folder .* not exists/);
    await missing.drop();
    expect(await initAgainstMuteServer((port) => def.create(optionsFor({ address: `127.0.0.1:${port}` }), { log, dataDir: '/x' }), codeOf)).toBe('UPSTREAM');
  });

  it('uploads through a temporary name and leaves no temp files', async () => {
    const root = await mkdtemp(join(sshd.dataDir, 'tmpcheck-'));
    const d = await def.create(optionsFor({ root_folder_path: root }), { log, dataDir: '/x' }) as Required<Driver>;
    await d.init(AbortSignal.timeout(10_000));
    await d.put(rootObj, Readable.from([Buffer.from('a')]), { name: 'x' });
    await d.put(rootObj, Readable.from([Buffer.from('bb')]), { name: 'x' });
    expect(await names(d, '/')).toEqual(['x']);
    expect((await d.get('/x', NO_ARGS)).size).toBe(2);
    expect((await d.usage(NO_ARGS)).total).toBeGreaterThan(0);
    await d.drop();
  });

  /** A driver on its own folder, mounted, with the PID of its server-side SFTP process. */
  async function mountWithSftpPid(): Promise<{ d: Required<Driver>; root: string; pid: number }> {
    const before = new Set(await sftpProcesses(sshd.server.pid));
    const root = await mkdtemp(join(sshd.dataDir, 'chan-'));
    const d = await def.create(optionsFor({ root_folder_path: root }), { log, dataDir: '/x' }) as Required<Driver>;
    await d.init(AbortSignal.timeout(10_000));
    const mine = (await sftpProcesses(sshd.server.pid)).filter((p) => !before.has(p));
    expect(mine).toHaveLength(1);
    return { d, root, pid: mine[0]! };
  }

  it('forgets an SFTP channel that died under a live SSH connection and reconnects', async () => {
    const { d, pid } = await mountWithSftpPid();
    try {
      await d.put(rootObj, Readable.from([Buffer.from('x')]), { name: 'a.txt' });
      expect(await names(d, '/')).toEqual(['a.txt']);
      process.kill(pid, 'SIGKILL'); // the sshd session process (and the TCP connection) stay up
      await new Promise((r) => setTimeout(r, 200));
      expect(await within(names(d, '/'), 10_000)).toEqual(['a.txt']);
      expect(await within(d.get('/a.txt', NO_ARGS), 10_000)).toMatchObject({ size: 1 });
    } finally {
      await d.drop();
    }
  });

  it('fails an unanswered request after the deadline, drops the connection, then reconnects', async () => {
    const { d, pid } = await mountWithSftpPid();
    try {
      connOf(d).requestTimeoutMs = 1000;
      process.kill(pid, 'SIGSTOP'); // the channel stays open and never answers
      const t = Date.now();
      const err = await within(d.list(rootObj, NO_ARGS).then(() => undefined, (e: unknown) => e), 10_000);
      expect(codeOfError(err)).toBe('UPSTREAM');
      expect(String(err)).toMatch(/no answer/);
      expect(Date.now() - t).toBeLessThan(5000);
      expect(await within(names(d, '/'), 10_000)).toEqual([]);
    } finally {
      try { process.kill(pid, 'SIGKILL'); } catch { /* gone with its connection */ }
      await d.drop();
    }
  });

  it('fails an upload whose connection drops mid-transfer, and removes its temporary file later', async () => {
    const root = await mkdtemp(join(sshd.dataDir, 'cut-'));
    const proxy = await cutProxy(sshd.port);
    const d = await def.create(optionsFor({ address: `127.0.0.1:${proxy.port}`, root_folder_path: root }), { log, dataDir: '/x' }) as Required<Driver>;
    try {
      await d.init(AbortSignal.timeout(10_000));
      const chunk = randomBytes(64 * 1024);
      let stop = false;
      const endless = Readable.from((async function* () {
        while (!stop) { yield chunk; await new Promise((r) => setImmediate(r)); }
      })());
      let cut = false;
      const put = d.put(rootObj, endless, { name: 'big.bin', onProgress: (n) => { if (n > 4 << 20 && !cut) { cut = true; proxy.cut(); } } });
      const err = await within(put.then(() => undefined, (e: unknown) => e), 15_000);
      stop = true;
      expect(cut).toBe(true);
      expect(codeOfError(err)).toBe('UPSTREAM');
      expect(String(err)).toMatch(/connection lost|channel closed/);
      expect((await readdir(root)).filter((n) => n === 'big.bin')).toEqual([]);
      // The next call dials again and removes the temporary file in the background.
      expect(await within(names(d, '/'), 10_000)).not.toContain('big.bin');
      for (let i = 0; i < 50 && (await readdir(root)).length; i++) await new Promise((r) => setTimeout(r, 100));
      expect(await readdir(root)).toEqual([]);
    } finally {
      await d.drop();
      await proxy.close();
    }
  });

  it('uploads big files with several writes in flight, byte for byte; a failing source leaves nothing', async () => {
    const root = await mkdtemp(join(sshd.dataDir, 'big-'));
    const d = await def.create(optionsFor({ root_folder_path: root }), { log, dataDir: '/x' }) as Required<Driver>;
    try {
      await d.init(AbortSignal.timeout(10_000));
      // Count WRITE requests awaiting their answer on the channel.
      const { sftp } = await connOf(d).get();
      const write = sftp.write.bind(sftp);
      let inflight = 0;
      let maxInflight = 0;
      let maxLen = 0;
      sftp.write = ((h: Buffer, b: Buffer, off: number, len: number, pos: number, cb: (e?: Error | null) => void) => {
        inflight++;
        maxInflight = Math.max(maxInflight, inflight);
        maxLen = Math.max(maxLen, len);
        return write(h, b, off, len, pos, (e?: Error | null) => { inflight--; cb(e); });
      }) as typeof sftp.write;
      const data = randomBytes(24 << 20);
      // Uneven chunks: tiny ones are gathered, big ones split.
      const chunks: Buffer[] = [];
      for (let off = 0, i = 0; off < data.length; i++) {
        const n = [1, 700, 65_536, 300_000, 33_333][i % 5]!;
        chunks.push(data.subarray(off, off + n));
        off += n;
      }
      await d.put(rootObj, Readable.from(chunks), { name: 'big.bin', size: data.length });
      expect(sha256(await readFile(join(root, 'big.bin')))).toBe(sha256(data));
      expect(maxInflight).toBeGreaterThanOrEqual(4);
      expect(maxLen).toBeLessThanOrEqual(64 * 1024);

      const failing = Readable.from((async function* () {
        for (let off = 0; off < 8 << 20; off += 65_536) yield data.subarray(off, off + 65_536);
        throw new Error('source broke');
      })());
      await expect(d.put(rootObj, failing, { name: 'broken.bin' })).rejects.toMatchObject({ code: 'UPSTREAM' });
      expect(await readdir(root)).toEqual(['big.bin']);
      expect(await names(d, '/')).toEqual(['big.bin']); // the connection is still good
    } finally {
      await d.drop();
    }
  });
});
