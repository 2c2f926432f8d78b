/**
 * Bounded-state probe: state a client can grow must stay bounded, above all state an unauthenticated
 * or low-privilege client can grow. Each case sends hostile input with a real client on loopback and
 * asserts the size of what the server keeps (sockets, file handles, heap, DATA files, in-memory maps)
 * afterwards, never a timing. Found unbounded by the probe, each case fails until it is fixed:
 *
 * - SFTP: a TCP connection that never sends its SSH ident line was kept for good (ssh2 reports a
 *   connection only once that line arrived, and the login grace timer started there), with no cap
 *   on connections not logged in yet (OpenSSH: MaxStartups);
 * - SFTP: MAX_HANDLES bounded one channel, but channels per connection were not: one user held
 *   10,240 file descriptors on one connection;
 * - SFTP: READs waiting for the client to take its answers were unbounded in number (600,000 READs,
 *   20 MB on the wire, held 970 MB of heap);
 * - REST: SSH keys per user (count and title length) were unbounded: a user without any file
 *   permission grew store.json by 1 MB per request;
 * - REST: each logout keeps the token's id in store.json until it expires (48 h): a login + logout
 *   loop grew it without bound;
 * - WebDAV: the `<D:owner>` of a lock was kept whole (up to the 1 MiB body) for each of a user's
 *   1,000 locks: kv.jsonl and the heap grew by 1 MB per LOCK;
 * - login throttle: no cap on tracked addresses (and each failure past 100,000 walked them all);
 * - 2FA replay records: one per (user, secret), so re-enrolling grew them without end.
 */
import { spawn, spawnSync } from 'node:child_process';
import { readFileSync, statSync, writeFileSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { authenticator } from 'otplib';
import ssh2 from 'ssh2';
import type { SFTPWrapper } from 'ssh2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LoginThrottle } from '../src/auth/throttle.js';
import { startTestServer, type TestServer } from './harness.js';
import { createUser } from './auth-helpers.js';
import { PERM } from './fs-helpers.js';
import { davRequest } from './clients/webdav.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const LOW = { username: 'low', password: 'low-user-pass-1' };

let s: TestServer;
let dataDir: string;
let admin: string;

beforeAll(async () => {
  dataDir = await mkdtemp(join(tmpdir(), 'treegate-bounded-'));
  // A short SFTP idle timeout: the login grace is min(idle timeout, 120 s).
  await writeFile(join(dataDir, 'config.json'), JSON.stringify({ sftp: { idle_timeout: 1 } }));
  s = await startTestServer({ dataDir });
  admin = await s.login();
  // A user without any file permission, allowed WebDAV (with manage, for LOCK) and SFTP read.
  await createUser(s, admin, { ...LOW, permission: PERM.WEBDAV_READ | PERM.WEBDAV_MANAGE | PERM.SFTP_READ | PERM.WRITE });
  await writeFile(join(s.dataDir, 'storage', 'f.txt'), 'hello');
  await writeFile(join(s.dataDir, 'storage', 'big.bin'), Buffer.alloc(8 << 20, 7));
});
afterAll(async () => {
  await s?.close();
  if (dataDir) await rm(dataDir, { recursive: true, force: true });
});

function sshConnect(): Promise<ssh2.Client> {
  const c = new ssh2.Client();
  return new Promise((resolve, reject) => {
    c.on('ready', () => resolve(c)).on('error', reject);
    c.connect({ host: '127.0.0.1', port: s.sftpPort, username: LOW.username, password: LOW.password, readyTimeout: 20_000 });
  });
}

describe('SFTP', () => {
  it('connections that never send the SSH ident line are not kept: cut off at the login grace, and capped per address', async () => {
    const N = 100;
    const socks: Socket[] = [];
    let closed = 0;
    for (let i = 0; i < N; i++) {
      const k = connect({ host: '127.0.0.1', port: s.sftpPort });
      k.on('error', () => undefined);
      k.on('close', () => closed++);
      k.resume(); // read whatever comes, so an end from the server is seen
      socks.push(k);
    }
    try {
      await Promise.all(socks.map((k) => new Promise<void>((r) => (k.connecting ? k.once('connect', () => r()).once('close', () => r()) : r()))));
      await sleep(300);
      // Many connections from one address that never log in are not all held (OpenSSH: MaxStartups).
      const heldAtOnce = N - closed;
      expect(heldAtOnce, 'silent connections from one address held at once').toBeLessThanOrEqual(64);
      // And none survives the login grace (idle_timeout 1 s here).
      await sleep(3000);
      expect(N - closed, 'silent connections still open after the login grace').toBe(0);
    } finally {
      for (const k of socks) k.destroy();
    }
  });

  it("one user's open file handles are bounded over all channels of a connection", async () => {
    const conn = await sshConnect();
    let opened = 0;
    try {
      for (let c = 0; c < 12; c++) {
        const sftp = await new Promise<SFTPWrapper | undefined>((r) => conn.sftp((e, x) => r(e ? undefined : x)));
        if (!sftp) continue; // a channel refused is a bound too
        await Promise.all(Array.from({ length: 256 }, () => new Promise<void>((r) => sftp.open('/f.txt', 'r', (e) => ((opened += e ? 0 : 1), r())))));
      }
    } finally {
      conn.end();
    }
    // MAX_HANDLES (256) bounds one channel; 12 channels of one connection held 3,072 descriptors.
    expect(opened, 'read handles one user held open').toBeLessThanOrEqual(2048);
  });

  it('READs whose answers the client never takes do not pile up in memory', async () => {
    // The client runs in its own process, so this process's heap is the server's alone.
    const ssh2Entry = pathToFileURL(createRequire(import.meta.url).resolve('ssh2')).href;
    const script = join(dataDir, 'read-flood.mjs');
    writeFileSync(
      script,
      `import ssh2 from ${JSON.stringify(ssh2Entry)};
const [port, user, password, n] = process.argv.slice(2);
const c = new ssh2.Client();
c.on('error', (e) => { console.error('flood client:', e.message); process.exit(2); });
c.on('ready', () => c.sftp((e, sftp) => {
  if (e) process.exit(3);
  sftp.on('error', () => undefined);
  sftp.open('/big.bin', 'r', async (e2, h) => {
    if (e2) process.exit(4);
    // Read the transport, but never open the channel window again for the answers.
    c._protocol.channelWindowAdjust = () => {};
    const buf = Buffer.alloc(255 * 1024);
    for (let i = 0; i < Number(n); i++) {
      sftp.read(h, buf, 0, buf.length, (i * buf.length) % (8 << 20), () => {});
      if (i % 5000 === 4999) await new Promise((r) => setImmediate(r));
    }
    process.stdout.write('sent\\n');
    // Then keep the session busy, as such a client would, so no idle timeout ends it.
    setInterval(() => { try { sftp.read(h, buf, 0, 1, 0, () => {}); } catch {} }, 100);
  });
}));
c.connect({ host: '127.0.0.1', port: Number(port), username: user, password, readyTimeout: 20000 });
`,
    );
    const gc = (globalThis as { gc?: () => void }).gc;
    expect(gc, 'tests run with --expose-gc (vitest.config.ts)').toBeTypeOf('function');
    gc!();
    const before = process.memoryUsage().heapUsed;
    const child = spawn(process.execPath, [script, String(s.sftpPort), LOW.username, LOW.password, '200000'], { stdio: ['ignore', 'pipe', 'inherit'] });
    try {
      await new Promise<void>((resolve, reject) => {
        child.stdout.on('data', (d: Buffer) => d.toString().includes('sent') && resolve());
        child.once('exit', (code) => reject(new Error(`the flood client exited (${code}) before sending its READs`)));
      });
      await sleep(3000); // let the server take in what was sent
      gc!();
      const grown = (process.memoryUsage().heapUsed - before) / 2 ** 20;
      // Unbounded, 200,000 READs (6 MB sent) held some 300 MB here.
      expect(grown, 'server heap growth (MiB) after 200,000 unanswered READs').toBeLessThan(64);
    } finally {
      child.kill('SIGKILL');
    }
  });
});

describe('REST', () => {
  it("a user's SSH keys are bounded in number and size (store.json stays small)", async () => {
    const token = await s.login(LOW.username, LOW.password);
    const keyDir = join(dataDir, 'keys');
    await mkdir(keyDir, { recursive: true });
    expect(spawnSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', 'probe', '-f', join(keyDir, 'k')]).status).toBe(0);
    const pub = readFileSync(join(keyDir, 'k.pub'), 'utf8').trim();
    const storeFile = join(s.dataDir, 'store.json');
    const before = statSync(storeFile).size;
    const long = 'T'.repeat(16 * 1024);
    for (let i = 0; i < 100; i++) await s.api('/api/me/sshkey/add', { token, body: { title: `${i}-${long}`, key: pub } });
    for (let i = 0; i < 150; i++) await s.api('/api/me/sshkey/add', { token, body: { title: `short-${i}`, key: pub } });
    const listed = await s.api<{ total: number }>('/api/me/sshkey/list?page=1&per_page=1', { token });
    // Unbounded: 250 keys, 1.6 MB of titles (1 MB titles fit the JSON body limit: 100 MB of store).
    expect(statSync(storeFile).size - before, 'store.json growth (bytes)').toBeLessThan(1 << 20);
    expect(listed.data!.total, 'keys one user holds').toBeLessThanOrEqual(128);
  });

  it('login + logout loops do not grow the revocation list in store.json without bound', async () => {
    const cycles = 80;
    const loop = async (n: number) => {
      for (let i = 0; i < n; i++) {
        const t = await s.login(LOW.username, LOW.password);
        await s.api('/api/auth/logout', { token: t });
      }
    };
    await Promise.all([loop(cycles / 4), loop(cycles / 4), loop(cycles / 4), loop(cycles / 4)]);
    const doc = JSON.parse(readFileSync(join(s.dataDir, 'store.json'), 'utf8')) as { revokedTokens: unknown[] };
    // Unbounded: one entry per logout, kept for token_expires_in (48 h): 1.8 million at 10 a second.
    expect(doc.revokedTokens.length, `revocations kept after ${cycles} logouts of one user`).toBeLessThan(cycles);
  });

  it("a user re-enrolling 2FA again and again keeps one replay record, not one per secret", async () => {
    await createUser(s, admin, { username: 'otp-user', password: 'otp-user-pass-1' });
    const token = await s.login('otp-user', 'otp-user-pass-1');
    for (let i = 0; i < 5; i++) {
      const secret = (await s.api<{ secret: string }>('/api/auth/2fa/generate', { token, method: 'POST' })).data!.secret;
      expect(await s.api('/api/auth/2fa/verify', { token, body: { code: authenticator.generate(secret), secret } })).toMatchObject({ code: 200 });
      const r = await s.api('/api/auth/login', { body: { username: 'otp-user', password: 'otp-user-pass-1', otp_code: authenticator.generate(secret) } });
      expect(r.code, JSON.stringify(r)).toBe(200);
    }
    const steps = (s.running.core.accounts as unknown as { otpSteps: Map<unknown, unknown> }).otpSteps;
    expect(steps.size, 'replay records after 5 enrolments of one user').toBeLessThanOrEqual(1);
  });
});

describe('WebDAV', () => {
  it('a lock does not keep an owner of any size: kv.jsonl stays small', async () => {
    const owner = 'O'.repeat(256 * 1024);
    const body = `<?xml version="1.0"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:shared/></D:lockscope><D:locktype><D:write/></D:locktype><D:owner>${owner}</D:owner></D:lockinfo>`;
    for (let i = 0; i < 20; i++) await davRequest(s.url, 'LOCK', '/dav/f.txt', { user: LOW.username, password: LOW.password, body, headers: { Depth: '0', Timeout: 'Infinite' } });
    let size = 0;
    try {
      size = statSync(join(s.dataDir, 'kv.jsonl')).size;
    } catch {
      size = 0; // nothing kept at all
    }
    // Unbounded: 20 LOCKs kept 5 MB (1,000 locks per user, 1 MiB each: 1 GB).
    expect(size, 'kv.jsonl bytes after 20 LOCKs with a 256 KiB owner').toBeLessThan(1 << 20);
    // A usual owner still locks.
    const usual = body.replace(owner, '<D:href>DOMAIN\\user</D:href>');
    expect((await davRequest(s.url, 'LOCK', '/dav/f.txt', { user: LOW.username, password: LOW.password, body: usual, headers: { Depth: '0' } })).status).toBe(200);
  });
});

describe('login throttle', () => {
  it('tracks a bounded number of addresses however many fail (an IPv6 /48 holds 65,536 /64s)', () => {
    let now = 1_000_000;
    const t = new LoginThrottle(() => now);
    const entries = (t as unknown as { entries: Map<string, unknown> }).entries;
    for (let i = 0; i < 102_000; i++) {
      t.fail(`2001:db8:${(i >> 16).toString(16)}:${(i & 0xffff).toString(16)}::1`, 'admin');
      now += 1; // all within the 5-minute window: none has expired
    }
    expect(entries.size, 'addresses tracked after 102,000 failing /64s').toBeLessThanOrEqual(100_000);
  });
});

