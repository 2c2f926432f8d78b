/**
 * PuTTY's own tools against the SFTP server: psftp, pscp, plink and puttygen (putty-tools 0.78).
 * FileZilla (fzsftp, derived from psftp) and WinSCP (PuTTY's SSH core) cannot run here; these are
 * the closest stand-ins. Covered: password and .ppk key logins (ed25519, RSA), refused logins, what
 * PuTTY negotiates and each cipher family it can be made to prefer, the transfers and file
 * operations those clients do, a user with a base path, a read-only user, and pscp over SFTP.
 *
 * PuTTY keeps its host key cache and saved sessions under ~/.putty, so every run gets a temp HOME;
 * the host key is pinned with -hostkey (its SHA256 fingerprint, computed from DATA/ssh), never
 * taken from a prompt. psftp's `-be` goes on after a failed command, so one run shows each error.
 */
import { createHash, randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, readdir, readFile, rm, stat, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_PASSWORD, startTestServer, type TestServer } from './harness.js';
import { uploadLeftovers } from './clients/sftp.js';
import { requireTool, run } from './clients/webdav.js';

let s: TestServer;
let work: string;
let home: string;
let adminToken: string;
/** SHA256 fingerprints of the server's host keys, as -hostkey takes them. */
let edFp: string;
let rsaFp: string;
/** 3,000,000 random bytes: not a multiple of PuTTY's 32 KiB blocks, so the last READ is short. */
let big: Buffer;

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
const shaOf = async (p: string) => sha(await readFile(p));
const storage = (...p: string[]) => join(s.dataDir, 'storage', ...p);
const local = (...p: string[]) => join(work, ...p);
const exists = (p: string) => stat(p).then(() => true, () => false);
/** Every file under `dir` (relative path → sha256), for exact comparisons of server state. */
async function tree(dir: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const name of (await readdir(dir, { recursive: true })).sort()) {
    const st = await stat(join(dir, name));
    out[name] = st.isDirectory() ? 'dir' : await shaOf(join(dir, name));
  }
  return out;
}

async function fingerprint(file: string): Promise<string> {
  const blob = Buffer.from((await readFile(join(s.dataDir, 'ssh', file), 'utf8')).split(' ')[1]!, 'base64');
  return 'SHA256:' + createHash('sha256').update(blob).digest('base64').replace(/=+$/, '');
}

interface Login {
  user?: string;
  password?: string;
  /** .ppk file for -i. */
  key?: string;
  /** A saved session under ~/.putty/sessions (cipher or host key preferences). */
  load?: string;
  hostkey?: string;
}

function common(l: Login): string[] {
  return [
    '-batch', '-P', String(s.sftpPort), '-hostkey', l.hostkey ?? edFp, '-l', l.user ?? 'admin',
    ...(l.load ? ['-load', l.load] : []),
    ...(l.key ? ['-i', l.key] : ['-pw', l.password ?? ADMIN_PASSWORD]),
  ];
}

/** A UTF-8 locale: in the C locale PuTTY drops non-ASCII bytes from the names it prints. */
const tool = (cmd: string, args: string[]) => run(cmd, args, { env: { PATH: process.env.PATH, HOME: home, LANG: 'C.UTF-8' }, cwd: work, timeoutMs: 60_000 });

/** One psftp batch run (`-be`: go on after a failed command). */
async function psftp(l: Login, commands: string[], extra: string[] = []) {
  const file = local(`batch-${randomBytes(4).toString('hex')}`);
  await writeFile(file, commands.join('\n') + '\n');
  const r = await tool('psftp', [...common(l), '-be', ...extra, '-b', file, '127.0.0.1']);
  await rm(file);
  return r;
}

const pscp = (l: Login, args: string[]) => tool('pscp', [...common(l), '-q', ...args]);

/** A saved PuTTY session holding these settings (the command line cannot choose ciphers). */
const session = (name: string, lines: string[]) => writeFile(join(home, '.putty', 'sessions', name), lines.join('\n') + '\n');

async function keys(): Promise<Array<{ id: number; title: string; last_used_time: string }>> {
  const r = await s.api<{ content: Array<{ id: number; title: string; last_used_time: string }> }>('/api/me/sshkey/list', { token: adminToken });
  return r.data!.content;
}

beforeAll(async () => {
  for (const bin of ['psftp', 'pscp', 'plink', 'puttygen']) requireTool(bin, 'putty-tools');
  s = await startTestServer();
  work = await mkdtemp(join(tmpdir(), 'tg-putty-'));
  home = join(work, '.home');
  await mkdir(join(home, '.putty', 'sessions'), { recursive: true });
  adminToken = await s.login();
  edFp = await fingerprint('ssh_host_ed25519_key.pub');
  big = randomBytes(3_000_000);
  await writeFile(local('big.bin'), big);
  await mkdir(local('tree', 'sub'), { recursive: true });
  await writeFile(local('tree', 'a.txt'), 'a\n');
  await writeFile(local('tree', 'sub', 'b é.txt'), randomBytes(40_000));
  await writeFile(local('tree', 'empty.txt'), '');
  await mkdir(storage('home', 'bob', 'docs'), { recursive: true });
  await writeFile(storage('home', 'bob', 'docs', 'x.txt'), 'bob\n');
  await mkdir(storage('pub'), { recursive: true });
  await writeFile(storage('pub', 'p.txt'), 'public\n');
  const users: Array<Record<string, unknown>> = [
    // SFTP login + manage (bits 10, 11), write, rename, move, remove (3, 4, 5, 7).
    { username: 'bob', password: 'bob-password-1', base_path: '/home/bob', permission: 1024 | 2048 | 8 | 16 | 32 | 128 },
    { username: 'ro', password: 'ro-password-1', base_path: '/pub', permission: 1024 },
    { username: 'dis', password: 'dis-password-1', base_path: '/', permission: 1024, disabled: true },
  ];
  for (const u of users) expect(await s.api('/api/admin/user/create', { token: adminToken, body: { disabled: false, ...u } })).toMatchObject({ code: 200 });
}, 60_000);

afterAll(async () => {
  await s?.close();
  if (work) await rm(work, { recursive: true, force: true });
});

describe('pscp (PuTTY scp over SFTP)', () => {
  // pscp reads ahead past the end of a file and takes each reply it receives as the next block in
  // order: the EOF status for a read past the end, answered before the last (short) block, made it
  // stop with "Lost connection" and a truncated file (read-handle.ts now answers EOF in turn).
  it('downloads whole files of any size, keeps times with -p, and a tree with -r', async () => {
    await mkdir(storage('dl', 'sub'), { recursive: true });
    const files: Record<string, Buffer> = { 'big.bin': big, 'two.txt': Buffer.from('2\n'), 'block.bin': big.subarray(0, 32768), 'zero.bin': Buffer.alloc(0) };
    for (const [name, body] of Object.entries(files)) await writeFile(storage('dl', name), body);
    await writeFile(storage('dl', 'sub', 'c.txt'), 'c\n');
    const when = new Date('2020-01-02T03:04:05Z');
    await utimes(storage('dl', 'big.bin'), when, when);
    for (const name of Object.keys(files)) {
      const r = await pscp({}, ['-p', `127.0.0.1:/dl/${name}`, local(`got-${name}`)]);
      expect([r.code, r.stderr]).toEqual([0, expect.not.stringContaining('Lost connection')]);
      expect(await shaOf(local(`got-${name}`)), name).toBe(sha(files[name]!));
    }
    expect((await stat(local('got-big.bin'))).mtime.toISOString()).toBe(when.toISOString());
    const r = await pscp({}, ['-r', '127.0.0.1:/dl', local('dl-back')]);
    expect(r.code, r.stderr).toBe(0);
    expect(await tree(local('dl-back'))).toEqual(await tree(storage('dl')));
  });

  // Into an existing folder only: `pscp -r tree host:/new` (a target that does not exist yet) makes
  // /new and then opens /new itself for each file ("unable to open /new: failure"). That is pscp's
  // SFTP code (it never marks the folder it made as the target folder); OpenSSH's sshd answers the same.
  it('uploads a tree with -r (-sftp forced), twice into the same place, and keeps times with -p', async () => {
    await mkdir(storage('up'));
    for (let i = 0; i < 2; i++) {
      const r = await pscp({}, ['-sftp', '-r', local('tree'), '127.0.0.1:/up']);
      expect(r.code, r.stderr).toBe(0);
    }
    expect(await tree(storage('up', 'tree'))).toEqual(await tree(local('tree')));
    const when = new Date('2019-05-06T07:08:09Z');
    await utimes(local('big.bin'), when, when);
    expect((await pscp({}, ['-p', local('big.bin'), '127.0.0.1:/up/big.bin'])).code).toBe(0);
    expect(await shaOf(storage('up', 'big.bin'))).toBe(sha(big));
    expect((await stat(storage('up', 'big.bin'))).mtime.toISOString()).toBe(when.toISOString());
    expect(await uploadLeftovers(s.dataDir)).toEqual([]);
  });

  it('pscp -scp and plink commands are refused with the SFTP-only message; nothing is written', async () => {
    const scp = await pscp({}, ['-scp', local('big.bin'), '127.0.0.1:/scp.bin']);
    expect(scp.code).not.toBe(0);
    expect(scp.stderr).toContain('This service allows SFTP connections only.');
    const cmd = await tool('plink', [...common({}), '127.0.0.1', 'touch', 'x']);
    expect(cmd.code).toBe(1);
    expect(cmd.stderr).toContain('This service allows SFTP connections only.');
    expect(await exists(storage('scp.bin'))).toBe(false);
  });
});

describe('logins', () => {
  it('keys made by puttygen (ed25519, RSA) log in once registered; last_used_time moves', async () => {
    for (const type of ['ed25519', 'rsa']) {
      const ppk = local(`${type}.ppk`);
      const gen = await tool('puttygen', ['-q', '-t', type, ...(type === 'rsa' ? ['-b', '2048'] : []), '-C', `putty-${type}`, '--new-passphrase', '/dev/null', '-o', ppk]);
      expect(gen.code, gen.stderr).toBe(0);
      const pub = await tool('puttygen', [ppk, '-O', 'public-openssh']);
      expect(pub.stdout).toMatch(type === 'rsa' ? /^ssh-rsa AAAA\S+ putty-rsa\n$/ : /^ssh-ed25519 AAAA\S+ putty-ed25519\n$/);
      // Not registered yet: refused, and batch mode then stops at the password prompt.
      const before = await psftp({ key: ppk }, ['pwd']);
      expect(before.code).toBe(1);
      expect(before.stderr).toContain('Server refused our key');
      expect(await s.api('/api/me/sshkey/add', { token: adminToken, body: { title: type, key: pub.stdout } })).toMatchObject({ code: 200 });
      const added = (await keys()).find((k) => k.title === type)!;
      const r = await psftp({ key: ppk }, ['pwd']);
      expect([r.code, r.stdout]).toEqual([0, expect.stringContaining('Remote directory is /')]);
      const used = (await keys()).find((k) => k.title === type)!;
      expect(Date.parse(used.last_used_time)).toBeGreaterThan(Date.parse(added.last_used_time));
    }
  });

  it('a wrong password and a disabled user fail cleanly, each counted once', async () => {
    const wrong = await psftp({ password: 'not-the-password' }, ['pwd']);
    expect([wrong.code, wrong.stderr]).toEqual([1, expect.stringContaining('Configured password was not accepted')]);
    const dis = await psftp({ user: 'dis', password: 'dis-password-1' }, ['pwd']);
    expect([dis.code, dis.stdout]).toEqual([1, '']);
    const refused = s.logs.filter((l) => l.includes('sftp login refused')).map((l) => JSON.parse(l) as { user: string; reason: string });
    expect(refused.filter((l) => l.user === 'admin' && l.reason === 'bad_password')).toHaveLength(1);
    expect(refused.filter((l) => l.user === 'dis').map((l) => l.reason)).toEqual(['disabled']);
    // A success clears the count for the next tests.
    expect((await psftp({}, ['pwd'])).code).toBe(0);
  });
});

describe('negotiation', () => {
  it('PuTTY 0.78 defaults: curve25519, ssh-ed25519 host key, AES-256 CTR with HMAC-SHA-256, strict kex', async () => {
    const r = await psftp({}, ['pwd'], ['-v']);
    expect(r.code, r.stderr).toBe(0);
    for (const line of [
      'Enabling strict key exchange semantics',
      'Doing ECDH key exchange with curve Curve25519, using hash SHA-256',
      `ssh-ed25519 255 ${edFp}`,
      'Initialised AES-256 SDCTR',
      'Initialised HMAC-SHA-256',
    ]) expect(r.stderr).toContain(line);
  });

  it('each cipher family PuTTY can prefer moves a file intact; the RSA host key works too', async () => {
    rsaFp = await fingerprint('ssh_host_rsa_key.pub');
    // Families below WARN would ask before use, which batch mode refuses: only the first one is used.
    const cases: Array<[string, string[], string]> = [
      ['tg-chacha', ['Cipher=chacha20,WARN,aes,aesgcm,3des,des,blowfish,arcfour'], 'Initialised ChaCha20'],
      ['tg-gcm', ['Cipher=aesgcm,WARN,aes,chacha20,3des,des,blowfish,arcfour'], 'GCM'],
      ['tg-ctr', ['Cipher=aes,WARN,aesgcm,chacha20,3des,des,blowfish,arcfour'], 'Initialised AES-256 SDCTR'],
      ['tg-rsa', ['HostKey=rsa,WARN,ed448,ed25519,ecdsa,dsa'], `ssh-rsa 3072 ${rsaFp}`],
    ];
    for (const [name, lines, seen] of cases) {
      await session(name, lines);
      const r = await psftp({ load: name, hostkey: name === 'tg-rsa' ? rsaFp : edFp }, [`put big.bin ${name}.bin`, `get ${name}.bin ${name}.back`], ['-v']);
      expect([r.code, r.stderr], name).toEqual([0, expect.stringContaining(seen)]);
      expect(await shaOf(storage(`${name}.bin`)), name).toBe(sha(big));
      expect(await shaOf(local(`${name}.back`)), name).toBe(sha(big));
    }
  });
});

describe('psftp operations (what FileZilla and WinSCP do)', () => {
  it('put/get/reput/reget, mkdir, ren, mv, rm, rmdir, chmod, UTF-8 and spaced names', async () => {
    await writeFile(local('part.bin'), big.subarray(0, 1_000_000));
    await writeFile(local('lpart.bin'), big.subarray(0, 1_234_567));
    await writeFile(local('sp ace é.txt'), 'héllo\n');
    const r = await psftp({}, [
      'mkdir ops', 'cd ops', 'put big.bin', 'put part.bin resumed.bin', 'reput big.bin resumed.bin',
      'get big.bin back.bin', 'reget big.bin lpart.bin', 'mkdir "d ü"', 'put "sp ace é.txt" "d ü/x y.txt"',
      'ren "d ü" "d2 ü"', 'mv big.bin "d2 ü"', 'chmod 600 "d2 ü/big.bin"', 'mkdir gone', 'rmdir gone',
      'put part.bin junk.bin', 'rm junk.bin', 'ls "d2 ü"',
    ]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('reput: restarting at file position 1000000');
    expect(r.stdout).toContain('reget: restarting at file position 1234567');
    // chmod: the VFS has no modes. SETSTAT answers OK (psftp prints the change it asked for) and
    // nothing changes: README "## SFTP" (chmod/chown are accepted and ignored).
    expect(r.stdout).toContain('/ops/d2 ü/big.bin: 0644 -> 0600');
    expect(r.stdout).toMatch(/^-rw-r--r-- +1 admin +admin +3000000 .+ big\.bin$/m);
    expect(r.stdout).toMatch(/^-rw-r--r-- +1 admin +admin +7 .+ x y\.txt$/m);
    expect(await tree(storage('ops'))).toEqual({
      'd2 ü': 'dir', 'd2 ü/big.bin': sha(big), 'd2 ü/x y.txt': sha(Buffer.from('héllo\n')), 'resumed.bin': sha(big),
    });
    expect(await shaOf(local('back.bin'))).toBe(sha(big));
    expect(await shaOf(local('lpart.bin'))).toBe(sha(big));
    expect(await uploadLeftovers(s.dataDir)).toEqual([]);
  });

  it('errors are shown and leave the tree as it was (psftp shows only the status, not our message)', async () => {
    await mkdir(storage('errs', 'full'), { recursive: true });
    await writeFile(storage('errs', 'full', 'f.txt'), 'f\n');
    await writeFile(storage('errs', 'g.txt'), 'g\n');
    const before = await tree(storage('errs'));
    const r = await psftp({}, ['cd errs', 'rmdir full', 'rm full', 'mkdir full', 'cd nope', 'get nope.bin', 'mv g.txt full/f.txt', 'put big.bin full']);
    expect(r.code).toBe(0);
    expect(r.stdout + r.stderr).toContain('rmdir /errs/full: failure');
    expect(r.stdout + r.stderr).toContain('rm /errs/full: failure');
    expect(r.stdout + r.stderr).toContain('mkdir /errs/full: failure');
    expect(r.stdout + r.stderr).toContain('Directory /errs/nope: no such file or directory');
    expect(r.stdout + r.stderr).toContain('/errs/nope.bin: open for read: no such file or directory');
    expect(r.stdout + r.stderr).toContain('mv /errs/g.txt /errs/full/f.txt: failure');
    expect(r.stdout + r.stderr).toContain('/errs/full: open for write: failure');
    expect(await tree(storage('errs'))).toEqual(before);
  });

  it('lists a folder of 2,000 entries in full', async () => {
    await mkdir(storage('many'));
    const names = Array.from({ length: 2000 }, (_, i) => `f${String(i).padStart(4, '0')} é.txt`);
    for (const n of names) await writeFile(storage('many', n), n);
    const r = await psftp({}, ['ls many']);
    expect(r.code, r.stderr).toBe(0);
    const listed = r.stdout.split('\n').filter((l) => l.startsWith('-rw-r--r--'));
    expect(listed.map((l) => l.replace(/^.* \d\d:\d\d /, '')).sort()).toEqual(names);
    for (const l of listed) expect(l).toMatch(/^-rw-r--r-- +1 admin +admin +12 \w{3} [ \d]\d \d\d:\d\d f\d{4} é\.txt$/);
  });

  it('a user with a base path sees it as / and cannot leave it', async () => {
    const r = await psftp({ user: 'bob', password: 'bob-password-1' }, ['pwd', 'cd ..', 'pwd', 'cd docs', 'get x.txt bx.txt', 'cd ../..', 'put big.bin', 'mkdir n', 'ls']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout.match(/^Remote directory is .*$/gm)).toEqual([
      'Remote directory is /', 'Remote directory is now /', 'Remote directory is /', 'Remote directory is now /docs', 'Remote directory is now /',
    ]);
    expect(r.stdout).toContain('remote:/docs/x.txt => local:bx.txt');
    expect(await readFile(local('bx.txt'), 'utf8')).toBe('bob\n');
    expect(await tree(storage('home', 'bob'))).toEqual({ 'big.bin': sha(big), docs: 'dir', 'docs/x.txt': sha(Buffer.from('bob\n')), n: 'dir' });
  });

  it('a read-only user reads; every write is refused with "permission denied" and nothing is written', async () => {
    const ro = { user: 'ro', password: 'ro-password-1' };
    const r = await psftp(ro, ['get p.txt rp.txt', 'put big.bin', 'reput big.bin p.txt', 'mkdir n', 'rm p.txt', 'mv p.txt q.txt']);
    expect(await readFile(local('rp.txt'), 'utf8')).toBe('public\n');
    const out = r.stdout + r.stderr;
    for (const line of ['/big.bin: open for write: permission denied', '/p.txt: open for write: permission denied', 'mkdir /n: permission denied', 'rm /p.txt: permission denied', 'mv /p.txt /q.txt: permission denied']) {
      expect(out).toContain(line);
    }
    const up = await pscp(ro, [local('big.bin'), '127.0.0.1:/pscp.bin']);
    expect(up.code).not.toBe(0);
    expect(up.stderr).toContain('permission denied');
    expect(await tree(storage('pub'))).toEqual({ 'p.txt': sha(Buffer.from('public\n')) });
    expect(await uploadLeftovers(s.dataDir)).toEqual([]);
  });
});
