/**
 * SFTP sessions: host key stability, refused shell/exec, scp's exit status, 2FA via keyboard-
 * interactive, an upload killed halfway, out-of-order and random-access writes, pipelined reads,
 * extensions (limits, statvfs), and that vanished clients leave no handles, fds or temp files.
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { authenticator } from 'otplib';
import ssh2 from 'ssh2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from './harness.js';
import { makeKey, requireSftpTools, run, runSftp, scanHostKey, spawnSftp, statusCode, until, uploadLeftovers, withSsh2Sftp, type KeyPair } from './clients/sftp.js';

const STATUS = ssh2.utils.sftp.STATUS_CODE;
let s: TestServer;
let dir: string;
let key: KeyPair;
let privateKey: Buffer;
/** Ours, not the harness's: its close() deletes a data dir it made, and the restart test reuses it. */
let dataDir: string;

const storage = () => join(s.dataDir, 'storage');
const sshOpts = () => ['-p', String(s.sftpPort), '-o', 'StrictHostKeyChecking=no', '-o', 'UserKnownHostsFile=/dev/null', '-o', 'IdentitiesOnly=yes', '-o', 'BatchMode=yes', '-i', key.path];
const asAdmin = () => ({ port: s.sftpPort, username: 'admin', privateKey });

const leftovers = () => uploadLeftovers(s.dataDir);

beforeAll(async () => {
  requireSftpTools([['rclone', 'rclone'], ['scp', 'openssh-client'], ['ssh', 'openssh-client']]);
  dir = await mkdtemp(join(tmpdir(), 'treegate-sftp-session-'));
  dataDir = await mkdtemp(join(tmpdir(), 'treegate-sftp-session-data-'));
  s = await startTestServer({ dataDir });
  key = await makeKey(dir, 'admin_key');
  privateKey = await readFile(key.path);
  expect(await s.api('/api/me/sshkey/add', { token: await s.login(), body: { title: 'k', key: key.pub } })).toMatchObject({ code: 200 });
});

afterAll(async () => {
  await s?.close();
  for (const d of [dir, dataDir]) if (d) await rm(d, { recursive: true, force: true });
});

describe('server', () => {
  it('keeps its host key across a restart on the same data dir; key files are 0600', async () => {
    const first = await scanHostKey(s.sftpPort);
    const pub = (await readFile(join(s.dataDir, 'ssh', 'ssh_host_ed25519_key.pub'), 'utf8')).trim();
    expect(pub.startsWith(first)).toBe(true);
    // A first start serves ed25519 at once and adds RSA once generated in the background.
    let rsa = '';
    await until(async () => (rsa = await scanHostKey(s.sftpPort, 'rsa').catch(() => '')) !== '', 20_000);
    expect(rsa).toMatch(/^ssh-rsa /);
    for (const f of ['ssh_host_ed25519_key', 'ssh_host_rsa_key']) expect((await stat(join(s.dataDir, 'ssh', f))).mode & 0o777).toBe(0o600);
    await s.close();
    s = await startTestServer({ dataDir });
    expect(await scanHostKey(s.sftpPort)).toBe(first);
    expect(await scanHostKey(s.sftpPort, 'rsa')).toBe(rsa);
  });

  it('refuses shell and exec with a message; scp (SFTP mode) gets its exit status', async () => {
    const exec = await run('ssh', [...sshOpts(), 'admin@127.0.0.1', 'echo', 'hi']);
    expect(exec.code).toBe(1);
    expect(exec.stderr).toContain('SFTP connections only');
    expect(exec.stdout).not.toContain('hi');
    const shell = await run('ssh', [...sshOpts(), '-tt', 'admin@127.0.0.1']);
    expect(shell.code, shell.stdout + shell.stderr).toBe(1);
    expect(shell.stdout + shell.stderr).toContain('SFTP connections only');
    const local = join(dir, 'scp.txt');
    await writeFile(local, 'via scp');
    const scp = await run('scp', ['-P', String(s.sftpPort), ...sshOpts().slice(2), local, 'admin@127.0.0.1:/scp.txt']);
    expect(scp.code, scp.stderr).toBe(0);
    expect(await readFile(join(storage(), 'scp.txt'), 'utf8')).toBe('via scp');
  });

  it('forgets a closed channel at once, not when its connection ends (ControlMaster: one channel per run)', async () => {
    const channels = () => s.running.sftp!.channels();
    const before = channels();
    await withSsh2Sftp({ port: s.sftpPort, username: 'admin', privateKey }, async (first, client) => {
      expect(channels()).toBe(before + 1);
      for (let i = 0; i < 5; i++) {
        const sftp = await new Promise<ssh2.SFTPWrapper>((resolve, reject) => client.sftp((e, c) => (e ? reject(e) : resolve(c))));
        expect(channels()).toBe(before + 2);
        const closed = new Promise((r) => sftp.once('close', r));
        sftp.end();
        await closed;
        for (let t = 0; t < 100 && channels() !== before + 1; t++) await new Promise((r) => setTimeout(r, 10));
        expect(channels()).toBe(before + 1);
      }
      expect(await statusCode((cb) => first.stat('/', cb))).toBeUndefined(); // the first channel still works
    });
  });

  it('advertises limits@openssh.com (255 KiB reads and writes) and answers statvfs', async () => {
    const r = await runSftp({ port: s.sftpPort, user: 'admin', key: key.path, args: ['-vvv'] }, ['df']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/server upload\/download buffer sizes 261120 \/ 261120/);
    expect(r.stdout).toMatch(/Size\s+Used\s+Avail/);
  });

  it('shows the announcement as the SSH banner', async () => {
    await s.running.core.settings.save({ announcement: 'Welcome to treegate tests' });
    const { Client } = ssh2;
    const c = new Client();
    const banner = await new Promise<string>((resolve, reject) => {
      c.on('banner', (m) => resolve(m));
      c.on('error', reject);
      c.on('ready', () => resolve(''));
      c.connect({ host: '127.0.0.1', port: s.sftpPort, username: 'admin', privateKey });
    });
    c.end();
    expect(banner).toContain('Welcome to treegate tests');
  });
});

describe('2FA', () => {
  it('password users with TOTP must pass a code through keyboard-interactive', async () => {
    const secret = authenticator.generateSecret(20);
    const store = s.running.core.store;
    const token = await s.login();
    const body = { username: 'otto', password: 'otto-pass-1', base_path: '/', role: 0, permission: 1024 | 2048, disabled: false };
    expect(await s.api('/api/admin/user/create', { token, body })).toMatchObject({ code: 200 });
    const otto = (await store.users.findBy('username', 'otto'))[0]!;
    await store.users.update(otto.id, { otp_secret: secret });
    const opts = { port: s.sftpPort, username: 'otto' };
    // The password method alone is refused…
    await expect(withSsh2Sftp({ ...opts, password: 'otto-pass-1' }, async () => 'in')).rejects.toThrow(/authentication methods failed/);
    // …a wrong code too, and the right one gets in.
    const answers = (code: string) => (p: string) => (p.startsWith('Password') ? 'otto-pass-1' : code);
    await expect(withSsh2Sftp({ ...opts, answers: answers('000000') }, async () => 'in')).rejects.toThrow(/authentication methods failed/);
    await s.login(); // clear this IP's failure count
    expect(await withSsh2Sftp({ ...opts, answers: answers(authenticator.generate(secret)) }, async () => 'in')).toBe('in');
  });
});

describe('uploads', () => {
  it('a put killed halfway leaves nothing under the final name and no temp file', async () => {
    const big = join(dir, 'kill.bin');
    spawnSync('sh', ['-c', `head -c ${400 << 20} /dev/urandom > ${big}`]);
    const child = await spawnSftp({ port: s.sftpPort, user: 'admin', key: key.path }, [`put ${big} /killed.bin`]);
    const started = await until(async () => (await leftovers()).length > 0, 20_000);
    expect(started).toBe(true);
    child.kill('SIGKILL');
    await new Promise((r) => child.once('close', r));
    expect(await until(async () => (await leftovers()).length === 0, 15_000)).toBe(true);
    await expect(stat(join(storage(), 'killed.bin'))).rejects.toThrow();
    await rm(big);
  }, 90_000);

  it('reassembles out-of-order and random-access writes; refuses rewriting streamed bytes', async () => {
    const chunk = (i: number, n = 32768) => Buffer.alloc(n, i % 251);
    await withSsh2Sftp(asAdmin(), async (sftp) => {
      const write = (h: Buffer, b: Buffer, off: number) => new Promise<void>((res, rej) => sftp.write(h, b, 0, b.length, off, (e) => (e ? rej(e) : res())));
      const open = (p: string) => new Promise<Buffer>((res, rej) => sftp.open(p, 'w', (e, h) => (e ? rej(e) : res(h))));
      const close = (h: Buffer) => new Promise<void>((res, rej) => sftp.close(h, (e) => (e ? rej(e) : res())));
      // 64 chunks sent in a shuffled order, all in flight at once.
      const h = await open('/shuffled.bin');
      const order = [...Array(64).keys()].sort((a, b) => ((a * 37) % 64) - ((b * 37) % 64));
      await Promise.all(order.map((i) => write(h, chunk(i), i * 32768)));
      await close(h);
      // Far-ahead write (beyond the reorder window), a hole, then the start: spills to DATA/tmp.
      const h2 = await open('/sparse.bin');
      await write(h2, chunk(7), 40 << 20);
      await write(h2, chunk(1), 0);
      await close(h2);
      // Rewriting bytes already handed to the put is refused.
      const h3 = await open('/rewrite.bin');
      await write(h3, chunk(1), 0);
      await write(h3, chunk(2), 32768);
      expect(await statusCode((cb) => sftp.write(h3, chunk(3), 0, 32768, 0, cb))).toBe(STATUS.OP_UNSUPPORTED);
      await close(h3).catch(() => undefined);
    });
    const want = Buffer.concat([...Array(64).keys()].map((i) => chunk(i)));
    expect((await readFile(join(storage(), 'shuffled.bin'))).equals(want)).toBe(true);
    const sparse = await readFile(join(storage(), 'sparse.bin'));
    expect(sparse.length).toBe((40 << 20) + 32768);
    expect(sparse.subarray(0, 32768).equals(chunk(1))).toBe(true);
    expect(sparse.subarray(32768, 40 << 20).every((b) => b === 0)).toBe(true);
    expect(sparse.subarray(40 << 20).equals(chunk(7))).toBe(true);
    expect(await leftovers()).toEqual([]);
  });
});

describe('a connection dropped right after CLOSE', () => {
  it('still lands the upload: the CLOSE had all its bytes', async () => {
    const data = Buffer.alloc(4 << 20, 7);
    await withSsh2Sftp(asAdmin(), async (sftp, client) => {
      const h = await new Promise<Buffer>((res, rej) => sftp.open('/dropped-after-close.bin', 'w', (e, v) => (e ? rej(e) : res(v))));
      const writes: Promise<void>[] = [];
      for (let off = 0; off < data.length; off += 32768) {
        writes.push(new Promise<void>((res, rej) => sftp.write(h, data, off, 32768, off, (e) => (e ? rej(e) : res()))));
      }
      await Promise.all(writes);
      sftp.close(h, () => undefined); // not waited for: the client hangs up at once
      client.end();
    });
    const target = join(storage(), 'dropped-after-close.bin');
    expect(await until(async () => (await stat(target).catch(() => undefined))?.size === data.length, 15_000)).toBe(true);
    expect((await readFile(target)).equals(data)).toBe(true);
    expect(await leftovers()).toEqual([]);
  });
});

describe('exclusive create (OPEN with CREAT|EXCL)', () => {
  it('a second exclusive open of the same path fails while the first is open; the first lands', async () => {
    const target = join(storage(), 'excl-lock.txt');
    await withSsh2Sftp(asAdmin(), async (a) =>
      withSsh2Sftp(asAdmin(), async (b) => {
        const open = (c: import('ssh2').SFTPWrapper) => new Promise<Buffer>((res, rej) => c.open('/excl-lock.txt', 'wx', (e, h) => (e ? rej(e) : res(h))));
        const ha = await open(a);
        expect(await statusCode((cb) => b.open('/excl-lock.txt', 'wx', cb))).toBe(STATUS.FAILURE);
        await new Promise<void>((res, rej) => a.write(ha, Buffer.from('AAAA'), 0, 4, 0, (e) => (e ? rej(e) : res())));
        await new Promise<void>((res, rej) => a.close(ha, (e) => (e ? rej(e) : res())));
        // Taken now: still refused, and the file keeps the first writer's bytes.
        expect(await statusCode((cb) => b.open('/excl-lock.txt', 'wx', cb))).toBe(STATUS.FAILURE);
      }),
    );
    expect(await readFile(target, 'utf8')).toBe('AAAA');
  });
});

describe('a trailing slash names a folder', () => {
  it('OPEN of name/ creates nothing; STAT of file/ is no such file; STAT of folder/ works', async () => {
    await writeFile(join(storage(), 'slash-file.bin'), 'f');
    const codes = await withSsh2Sftp(asAdmin(), async (sftp) => [
      await statusCode((cb) => sftp.open('/slash-new/', 'w', cb)),
      await statusCode((cb) => sftp.stat('/slash-file.bin/', cb)),
      await statusCode((cb) => sftp.stat('/slash-file.bin', cb)),
      await statusCode((cb) => sftp.stat('/', cb)),
    ]);
    expect(codes).toEqual([STATUS.FAILURE, STATUS.NO_SUCH_FILE, undefined, undefined]);
    await expect(stat(join(storage(), 'slash-new'))).rejects.toThrow();
  });
});

describe('what sshfs sends', () => {
  type Cb<T = void> = (err: (Error & { code?: number }) | null | undefined, v: T) => void;
  const p = <T>(call: (cb: Cb<T>) => void) => new Promise<T>((res, rej) => call((e, v) => (e ? rej(e) : res(v))));

  it('STAT/LSTAT of a file open for writing answer the handle (size so far) until CLOSE', async () => {
    await withSsh2Sftp(asAdmin(), async (sftp) => {
      const h = await p<Buffer>((cb) => sftp.open('/created.txt', 'w', cb)); // WRITE|CREAT|TRUNC
      const st0 = await p<import('ssh2').Stats>((cb) => sftp.stat('/created.txt', cb));
      expect([st0.isFile(), st0.size]).toEqual([true, 0]);
      await p<void>((cb) => sftp.write(h, Buffer.from('hello'), 0, 5, 0, (e) => cb(e, undefined)));
      const [st1, lst1] = [await p<import('ssh2').Stats>((cb) => sftp.stat('/created.txt', cb)), await p<import('ssh2').Stats>((cb) => sftp.lstat('/created.txt', cb))];
      expect([st1.isFile(), st1.size, lst1.size]).toEqual([true, 5, 5]);
      await p<void>((cb) => sftp.close(h, (e) => cb(e, undefined)));
      expect((await p<import('ssh2').Stats>((cb) => sftp.stat('/created.txt', cb))).size).toBe(5);
    });
    expect(await readFile(join(storage(), 'created.txt'), 'utf8')).toBe('hello');
  });

  it('(F)SETSTAT: the current size is a no-op, any other size is OP_UNSUPPORTED; mtime and size both count', async () => {
    await writeFile(join(storage(), 'sized.txt'), '12345');
    const old = (await stat(join(storage(), 'sized.txt'))).mtimeMs;
    const t = { atime: 1_600_000_000, mtime: 1_600_000_000 };
    const codes = await withSsh2Sftp(asAdmin(), async (sftp) => {
      const w = await p<Buffer>((cb) => sftp.open('/sized-w.txt', 'w', cb));
      await p<void>((cb) => sftp.write(w, Buffer.from('abc'), 0, 3, 0, (e) => cb(e, undefined)));
      const r = await p<Buffer>((cb) => sftp.open('/sized.txt', 'r', cb));
      const out = [
        await statusCode((cb) => sftp.fsetstat(w, { size: 3 }, cb)),
        await statusCode((cb) => sftp.fsetstat(w, { size: 0 }, cb)), // sshfs ftruncate
        await statusCode((cb) => sftp.fsetstat(w, { size: 1, ...t }, cb)),
        await statusCode((cb) => sftp.fsetstat(r, { size: 2 }, cb)),
        await statusCode((cb) => sftp.setstat('/sized.txt', { size: 0, ...t }, cb)), // refused whole: mtime untouched
        await statusCode((cb) => sftp.setstat('/sized.txt', { size: 5 }, cb)),
      ];
      expect((await stat(join(storage(), 'sized.txt'))).mtimeMs).toBe(old);
      out.push(await statusCode((cb) => sftp.setstat('/sized.txt', { size: 5, ...t }, cb)));
      await p<void>((cb) => sftp.close(r, (e) => cb(e, undefined)));
      await p<void>((cb) => sftp.close(w, (e) => cb(e, undefined)));
      return out;
    });
    const U = STATUS.OP_UNSUPPORTED;
    expect(codes).toEqual([undefined, U, U, U, U, undefined, undefined]);
    expect(await readFile(join(storage(), 'sized-w.txt'), 'utf8')).toBe('abc');
    expect(await readFile(join(storage(), 'sized.txt'), 'utf8')).toBe('12345');
    expect((await stat(join(storage(), 'sized.txt'))).mtimeMs).toBe(1_600_000_000_000);
  });

  it('MKDIR and OPEN under a missing folder are NO_SUCH_FILE and create nothing; under a file, FAILURE', async () => {
    await writeFile(join(storage(), 'plain.txt'), 'x');
    const codes = await withSsh2Sftp(asAdmin(), async (sftp) => [
      await statusCode((cb) => sftp.mkdir('/nodir-a/b/c', cb)),
      await statusCode((cb) => sftp.open('/nodir-b/x.txt', 'w', (e) => cb(e))),
      await statusCode((cb) => sftp.open('/nodir-c/x.txt', 'a', (e) => cb(e))),
      await statusCode((cb) => sftp.mkdir('/plain.txt/sub', cb)),
      await statusCode((cb) => sftp.open('/plain.txt/x.txt', 'w', (e) => cb(e))),
    ]);
    expect(codes).toEqual([STATUS.NO_SUCH_FILE, STATUS.NO_SUCH_FILE, STATUS.NO_SUCH_FILE, STATUS.FAILURE, STATUS.FAILURE]);
    expect((await readdir(storage())).filter((n) => n.startsWith('nodir-'))).toEqual([]);
  });
});

describe('sessions', () => {
  it('serves concurrent sessions and several SFTP channels on one connection', async () => {
    const files = await Promise.all(
      [0, 1, 2, 3].map(async (i) => {
        const local = join(dir, `conc-${i}.bin`);
        await writeFile(local, Buffer.alloc((3 + i) << 20, i + 1));
        return local;
      }),
    );
    const runs = await Promise.all(files.map((f, i) => runSftp({ port: s.sftpPort, user: 'admin', key: key.path }, [`put ${f} /conc-${i}.bin`, `get /conc-${i}.bin ${f}.back`])));
    for (const [i, r] of runs.entries()) {
      expect(r.code, r.stderr).toBe(0);
      expect((await readFile(`${files[i]}.back`)).equals(await readFile(files[i]!))).toBe(true);
    }
    await withSsh2Sftp(asAdmin(), async (first, client) => {
      const more = await Promise.all([0, 1].map(() => new Promise<import('ssh2').SFTPWrapper>((res, rej) => client.sftp((e, w) => (e ? rej(e) : res(w))))));
      await Promise.all(
        [first, ...more].map((ch, i) => new Promise<void>((res, rej) => ch.writeFile(`/chan-${i}.txt`, `channel ${i}`, (e) => (e ? rej(e) : res())))),
      );
    });
    for (const i of [0, 1, 2]) expect(await readFile(join(storage(), `chan-${i}.txt`), 'utf8')).toBe(`channel ${i}`);
  });

  it('rclone (concurrent out-of-order writes and reads) round-trips a file', async () => {
    const local = join(dir, 'rclone.bin');
    const data = Buffer.alloc(24 << 20);
    for (let i = 0; i < data.length; i += 4) data.writeUInt32LE((i * 40503) >>> 0, i);
    await writeFile(local, data);
    const remote = ['--sftp-host', '127.0.0.1', '--sftp-port', String(s.sftpPort), '--sftp-user', 'admin', '--sftp-key-file', key.path, '--sftp-concurrency', '64', '--config', '/dev/null'];
    const up = await run('rclone', ['copyto', local, ':sftp:/rclone.bin', ...remote], 90_000);
    expect(up.code, up.stderr).toBe(0);
    expect((await readFile(join(storage(), 'rclone.bin'))).equals(data)).toBe(true);
    const down = await run('rclone', ['copyto', ':sftp:/rclone.bin', `${local}.back`, ...remote], 90_000);
    expect(down.code, down.stderr).toBe(0);
    expect((await readFile(`${local}.back`)).equals(data)).toBe(true);
  }, 120_000);

  it('RENAME refuses an existing target; posix-rename@openssh.com replaces it', async () => {
    for (const [n, body] of [['ra', 'a'], ['rb', 'b'], ['rc', 'c']] as const) await writeFile(join(storage(), `${n}.txt`), body);
    const codes = await withSsh2Sftp(asAdmin(), async (sftp) => [
      await statusCode((cb) => sftp.rename('/ra.txt', '/rb.txt', cb)),
      await statusCode((cb) => sftp.ext_openssh_rename('/rc.txt', '/rb.txt', cb)),
    ]);
    expect(codes).toEqual([STATUS.FAILURE, undefined]);
    expect(await readFile(join(storage(), 'rb.txt'), 'utf8')).toBe('c');
    expect(await readFile(join(storage(), 'ra.txt'), 'utf8')).toBe('a');
  });
});

describe('downloads and resources', () => {
  it('serves pipelined, reordered reads (fastGet, 64 in flight) and `sftp -R`', async () => {
    const data = Buffer.alloc(20 << 20);
    for (let i = 0; i < data.length; i += 4) data.writeUInt32LE((i * 2654435761) >>> 0, i);
    await writeFile(join(storage(), 'pipelined.bin'), data);
    const want = createHash('sha256').update(data).digest('hex');
    const out = join(dir, 'fast.bin');
    await withSsh2Sftp(asAdmin(), (sftp) => new Promise<void>((res, rej) => sftp.fastGet('/pipelined.bin', out, { concurrency: 64, chunkSize: 65536 }, (e) => (e ? rej(e) : res()))));
    expect(createHash('sha256').update(await readFile(out)).digest('hex')).toBe(want);
    const r = await runSftp({ port: s.sftpPort, user: 'admin', key: key.path, args: ['-R', '16', '-B', '65536'] }, [`get /pipelined.bin ${join(dir, 'r.bin')}`]);
    expect(r.code, r.stderr).toBe(0);
    expect(createHash('sha256').update(await readFile(join(dir, 'r.bin'))).digest('hex')).toBe(want);
  });

  it('a vanished client leaves no open fds, handles or temp files', async () => {
    const fds = async () => (await readdir('/proc/self/fd')).length;
    await writeFile(join(storage(), 'held.bin'), Buffer.alloc(1 << 20, 1));
    const baseline = await fds();
    await Promise.all(
      [0, 1, 2, 3].map(() =>
        withSsh2Sftp(asAdmin(), async (sftp, client) => {
          for (let i = 0; i < 10; i++) {
            const h = await new Promise<Buffer>((res, rej) => sftp.open('/held.bin', 'r', (e, hd) => (e ? rej(e) : res(hd))));
            await new Promise((res) => sftp.read(h, Buffer.alloc(4096), 0, 4096, i * 4096, res));
            const w = await new Promise<Buffer>((res, rej) => sftp.open(`/unfinished-${i}.bin`, 'w', (e, hd) => (e ? rej(e) : res(hd))));
            await new Promise((res) => sftp.write(w, Buffer.alloc(1000, 2), 0, 1000, 0, res));
          }
          // Vanish: drop the TCP connection without closing anything.
          (client as unknown as { _sock: { destroy(): void } })._sock.destroy();
        }),
      ),
    );
    expect(await until(async () => (await fds()) <= baseline + 2 && (await leftovers()).length === 0, 15_000)).toBe(true);
    expect((await readdir(storage())).filter((n) => n.startsWith('unfinished-'))).toEqual([]);
  });

  it('closes idle sessions after sftp.idle_timeout', async () => {
    const data = await mkdtemp(join(tmpdir(), 'treegate-idle-'));
    await writeFile(join(data, 'config.json'), JSON.stringify({ sftp: { idle_timeout: 2 } }));
    const idle = await startTestServer({ dataDir: data });
    try {
      const t = await idle.login();
      expect(await idle.api('/api/me/sshkey/add', { token: t, body: { title: 'k', key: key.pub } })).toMatchObject({ code: 200 });
      const closedAfter = await withSsh2Sftp({ port: idle.sftpPort, username: 'admin', privateKey }, async (_sftp, client) => {
        const t0 = Date.now();
        await new Promise((r) => client.once('close', () => r(null)));
        return Date.now() - t0;
      });
      expect(closedAfter).toBeGreaterThan(1500);
      expect(closedAfter).toBeLessThan(6000);
    } finally {
      await idle.close();
      await rm(data, { recursive: true, force: true });
    }
  });
});
