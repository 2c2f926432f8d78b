/**
 * Resuming transfers with clients the other tests do not run: lftp (sftp:// and http://), curl over
 * sftp://, OpenSSH `sftp` reget/reput, `curl -C -` and `wget -c` from /dav and /d, cadaver. Transfers
 * are SIGKILLed mid-way (rate-limited so there is a "mid-way") and resumed; every step checks the
 * bytes (sha256) on both sides and what the server keeps: SFTP and WebDAV uploads are atomic
 * (README), so a killed upload leaves nothing under its name and no temp file.
 */
import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, readdir, readFile, rm, stat, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_PASSWORD, startTestServer, type TestServer } from './harness.js';
import { requireSftpTools, runSftp, until, uploadLeftovers } from './clients/sftp.js';
import { davClient, requireTool, run } from './clients/webdav.js';

let s: TestServer;
let work: string;
let home: string;
/** 6 MiB of random bytes: about 6 s at the 1 MiB/s the interrupted transfers are limited to. */
let big: Buffer;
let bigFile: string;

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
const shaOf = async (p: string) => sha(await readFile(p));
const storage = (...p: string[]) => join(s.dataDir, 'storage', ...p);
const local = (...p: string[]) => join(work, ...p);
const size = (p: string) => stat(p).then((st) => st.size, () => -1);
const RATE = 1 << 20;

/** A client run in the temp HOME (its rc files, netrc) and the work folder. */
const tool = (cmd: string, args: string[]) => run(cmd, args, { env: { PATH: process.env.PATH, HOME: home }, cwd: work, timeoutMs: 60_000 });
const lftpSftp = (cmds: string) => tool('lftp', ['-u', `admin,${ADMIN_PASSWORD}`, '-p', String(s.sftpPort), 'sftp://127.0.0.1', '-e', `${cmds}; bye`]);
const lftpDav = (cmds: string) => tool('lftp', ['-e', `open -u admin,${ADMIN_PASSWORD} ${s.url}/dav/; ${cmds}; bye`]);
const sftpUrl = (p: string) => `sftp://127.0.0.1:${s.sftpPort}${p}`;
const curlSftp = (args: string[]) => tool('curl', ['-sS', '-k', '-u', `admin:${ADMIN_PASSWORD}`, ...args]);
const davUrl = (p: string) => `${s.url}/dav${p}`;
const dav = () => davClient(s.url, 'admin', ADMIN_PASSWORD);

/** Bytes of a server upload in flight (its temp file under the storage). */
async function uploading(): Promise<number> {
  let n = 0;
  for (const f of await uploadLeftovers(s.dataDir)) n += Math.max(0, await size(storage(f)));
  return n;
}

/**
 * Start a client in its own process group, wait until `progress` shows it is under way, then
 * SIGKILL the group (lftp's ssh child too) and wait for the exit.
 */
async function killMidway(cmd: string, args: string[], progress: () => Promise<number>): Promise<void> {
  const child = spawn(cmd, args, { cwd: work, env: { PATH: process.env.PATH, HOME: home }, stdio: ['ignore', 'ignore', 'pipe'], detached: true });
  let stderr = '';
  child.stderr!.on('data', (b: Buffer) => (stderr += b.toString()));
  let exit: number | null | undefined;
  const closed = new Promise((r) => child.once('close', (code) => r((exit = code))));
  const started = await until(async () => exit !== undefined || (await progress()) > 0, 20_000);
  const early = exit;
  if (early === undefined) process.kill(-child.pid!, 'SIGKILL');
  await closed;
  expect([started, early], `${cmd} ended before it was killed: ${stderr}`).toEqual([true, undefined]);
}

/** A partial local copy: the first `n` bytes of `big`. */
const partial = (name: string, n: number) => writeFile(local(name), big.subarray(0, n));

beforeAll(async () => {
  requireSftpTools([['ssh', 'openssh-client'], ['curl', 'curl']]);
  for (const [bin, pkg] of [['lftp', 'lftp'], ['cadaver', 'cadaver'], ['wget', 'wget']]) requireTool(bin!, pkg!);
  s = await startTestServer();
  work = await mkdtemp(join(tmpdir(), 'tg-resume-'));
  home = join(work, '.home');
  await mkdir(home);
  // lftp runs ssh itself: password through its own prompt handling, no host key stored anywhere.
  const ssh = 'ssh -a -x -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR -o PubkeyAuthentication=no';
  await writeFile(join(home, '.lftprc'), `set sftp:connect-program "${ssh}"\nset net:max-retries 1\nset net:reconnect-interval-base 1\nset cmd:fail-exit yes\n`);
  await writeFile(join(home, '.netrc'), `machine 127.0.0.1\nlogin admin\npassword ${ADMIN_PASSWORD}\n`, { mode: 0o600 });
  big = randomBytes(6 << 20);
  bigFile = local('big.bin');
  await writeFile(bigFile, big);
});

afterAll(async () => {
  await s?.close();
  if (work) await rm(work, { recursive: true, force: true });
});

describe('lftp over sftp://', () => {
  it('get -c resumes a download killed mid-way; the server file is untouched', async () => {
    await writeFile(storage('dl.bin'), big);
    await killMidway('lftp', ['-u', `admin,${ADMIN_PASSWORD}`, '-p', String(s.sftpPort), 'sftp://127.0.0.1', '-e', `set net:limit-rate ${RATE}; get dl.bin -o dl-part.bin; bye`], () => size(local('dl-part.bin')));
    const cut = await size(local('dl-part.bin'));
    expect(cut > 0 && cut < big.length, `partial size ${cut}`).toBe(true);
    const r = await lftpSftp('get -c dl.bin -o dl-part.bin');
    expect(r.code, r.stderr).toBe(0);
    expect(await shaOf(local('dl-part.bin'))).toBe(sha(big));
    expect(await shaOf(storage('dl.bin'))).toBe(sha(big));
  }, 60_000);

  it('a put killed mid-way leaves nothing on the server; put -c then uploads it whole', async () => {
    await killMidway('lftp', ['-u', `admin,${ADMIN_PASSWORD}`, '-p', String(s.sftpPort), 'sftp://127.0.0.1', '-e', `set net:limit-rate ${RATE}; put big.bin -o up.bin; bye`], uploading);
    expect(await until(async () => (await uploadLeftovers(s.dataDir)).length === 0, 15_000)).toBe(true);
    expect(await size(storage('up.bin'))).toBe(-1); // atomic: no partial file under the name
    const r = await lftpSftp('put -c big.bin -o up.bin');
    expect(r.code, r.stderr).toBe(0);
    expect(await shaOf(storage('up.bin'))).toBe(sha(big));
  }, 60_000);

  it('reput appends to a partial remote file (an open without TRUNC keeps its bytes)', async () => {
    await writeFile(storage('rp.bin'), big.subarray(0, 1_234_567));
    const r = await lftpSftp('reput big.bin -o rp.bin');
    expect(r.code, r.stderr).toBe(0);
    expect(await shaOf(storage('rp.bin'))).toBe(sha(big));
    expect(await uploadLeftovers(s.dataDir)).toEqual([]);
  });

  it('mirror -R and mirror --continue copy a tree both ways with its bytes and mtimes', async () => {
    // lftp pipelines WRITE, FSETSTAT(size, mtime) and CLOSE: the size is the file's own, so the
    // FSETSTAT must succeed and the mtime land (it was refused whole while the WRITE was in flight).
    const files: Record<string, Buffer> = { 'one.txt': Buffer.from('one\n'), 'a/two.txt': Buffer.from('two\n'), 'a/b/three.bin': randomBytes(300_000), 'a/empty': Buffer.alloc(0) };
    const when = new Date('2021-03-04T05:06:07Z');
    for (const [p, b] of Object.entries(files)) {
      await mkdir(join(local('tree', p), '..'), { recursive: true });
      await writeFile(local('tree', p), b);
      await utimes(local('tree', p), when, when);
    }
    const up = await lftpSftp('mirror -R --continue tree tree; mirror -R --continue tree tree');
    expect(up.code, up.stderr).toBe(0);
    const down = await lftpSftp('mirror --continue tree tree-back');
    expect(down.code, down.stderr).toBe(0);
    for (const [p, b] of Object.entries(files)) {
      for (const f of [storage('tree', p), local('tree-back', p)]) {
        expect([p, await shaOf(f), Math.floor((await stat(f)).mtimeMs / 1000)]).toEqual([p, sha(b), when.getTime() / 1000]);
      }
    }
    const names = async (d: string) => (await readdir(d, { recursive: true })).map((n) => relative('', n)).sort();
    expect(await names(storage('tree'))).toEqual(await names(local('tree')));
  });
});

describe('curl over sftp://', () => {
  it('-C - resumes a killed download; -C - -T appends to a partial remote file', async () => {
    await writeFile(storage('c.bin'), big);
    await killMidway('curl', ['-sS', '-k', '-u', `admin:${ADMIN_PASSWORD}`, '--limit-rate', String(RATE), '-o', 'c-part.bin', sftpUrl('/c.bin')], () => size(local('c-part.bin')));
    const cut = await size(local('c-part.bin'));
    expect(cut > 0 && cut < big.length, `partial size ${cut}`).toBe(true);
    const r = await curlSftp(['-C', '-', '-o', 'c-part.bin', sftpUrl('/c.bin')]);
    expect(r.code, r.stderr).toBe(0);
    expect(await shaOf(local('c-part.bin'))).toBe(sha(big));

    await writeFile(storage('cu.bin'), big.subarray(0, 999_999));
    const u = await curlSftp(['-C', '-', '-T', 'big.bin', sftpUrl('/cu.bin')]);
    expect(u.code, u.stderr).toBe(0);
    expect(await shaOf(storage('cu.bin'))).toBe(sha(big));
    // Nothing remote yet: -C - starts at 0.
    const n = await curlSftp(['-C', '-', '-T', 'big.bin', sftpUrl('/cu-new.bin')]);
    expect(n.code, n.stderr).toBe(0);
    expect(await shaOf(storage('cu-new.bin'))).toBe(sha(big));
  }, 60_000);
});

describe('OpenSSH sftp reget/reput', () => {
  it('reget completes a partial local file, reput a partial remote one', async () => {
    await writeFile(storage('o.bin'), big);
    await writeFile(storage('o-up.bin'), big.subarray(0, 2_000_000));
    await partial('o-part.bin', 3_000_000);
    const r = await runSftp({ port: s.sftpPort, user: 'admin', password: ADMIN_PASSWORD }, ['reget o.bin o-part.bin', 'reput big.bin o-up.bin'], { cwd: work });
    expect(r.code, r.stderr).toBe(0);
    expect(await shaOf(local('o-part.bin'))).toBe(sha(big));
    expect(await shaOf(storage('o-up.bin'))).toBe(sha(big));
  });
});

describe('HTTP downloads resumed from /dav and /d', () => {
  it('curl -C - and wget -c resume partial downloads with a 206; a complete file is left alone', async () => {
    await writeFile(storage('h.bin'), big);
    const token = await s.login();
    const got = await s.api<{ sign: string }>('/api/fs/get', { token, body: { path: '/h.bin' } });
    const dUrl = `${s.url}/d/h.bin?sign=${encodeURIComponent(got.data!.sign)}`;
    const davAuth = `http://admin:${ADMIN_PASSWORD}@127.0.0.1:${new URL(s.url).port}/dav/h.bin`;
    for (const [i, url] of [dUrl, davAuth].entries()) {
      // This curl (7.88) ignores --limit-rate on HTTP downloads from loopback, so it cannot be
      // killed mid-way: its partial file is made here; wget below is killed for real.
      const c = `curl-${i}.bin`;
      await partial(c, 1_111_111);
      const r = await tool('curl', ['-sS', '-f', '-C', '-', '-o', c, '-w', '%{http_code}', url]);
      expect([r.code, r.stdout], r.stderr).toEqual([0, '206']);
      expect(await shaOf(local(c))).toBe(sha(big));
      // Already complete: the server answers 416 with `bytes */size`, which curl takes as done.
      const again = await tool('curl', ['-sS', '-C', '-', '-o', c, url]);
      expect(again.code, again.stderr).toBe(0);
      expect(await shaOf(local(c))).toBe(sha(big));

      const w = `wget-${i}.bin`;
      await killMidway('wget', ['-q', '--limit-rate', String(RATE), '-O', w, url], () => size(local(w)));
      const wcut = await size(local(w));
      expect(wcut > 0 && wcut < big.length, `partial size ${wcut}`).toBe(true);
      const wr = await tool('wget', ['-S', '-c', '-O', w, url]);
      expect(wr.code, wr.stderr).toBe(0);
      expect(wr.stderr).toContain('206 Partial Content');
      expect(wr.stderr).toMatch(new RegExp(`content-range: bytes ${wcut}-${big.length - 1}/${big.length}`, 'i'));
      expect(await shaOf(local(w))).toBe(sha(big));
      const wagain = await tool('wget', ['-c', '-O', w, url]);
      expect(wagain.code, wagain.stderr).toBe(0);
      expect(wagain.stderr).toContain('already fully retrieved');
    }
    expect(await shaOf(storage('h.bin'))).toBe(sha(big));
  }, 90_000);
});

describe('WebDAV uploads interrupted and retried', () => {
  it('a curl PUT killed mid-body leaves no file (new name) or the old one (existing); a retry lands', async () => {
    await writeFile(storage('keep.bin'), 'old version');
    for (const name of ['new.bin', 'keep.bin']) {
      await killMidway('curl', ['-sS', '--limit-rate', String(RATE), '-u', `admin:${ADMIN_PASSWORD}`, '-T', 'big.bin', davUrl(`/${name}`)], uploading);
      expect(await until(async () => (await uploadLeftovers(s.dataDir)).length === 0, 15_000)).toBe(true);
    }
    expect(await size(storage('new.bin'))).toBe(-1);
    expect(await readFile(storage('keep.bin'), 'utf8')).toBe('old version');
    for (const name of ['new.bin', 'keep.bin']) {
      const r = await tool('curl', ['-sS', '-u', `admin:${ADMIN_PASSWORD}`, '-T', 'big.bin', '-w', '%{http_code}', davUrl(`/${name}`)]);
      expect([r.code, r.stdout], r.stderr).toEqual([0, name === 'new.bin' ? '201' : '204']);
      expect(await shaOf(storage(name))).toBe(sha(big));
    }
  }, 60_000);
});

describe('lftp over http:// (WebDAV)', () => {
  it('get -c resumes; put -c (a PUT with Range: bytes=N-M/size) is refused, never stored as the file', async () => {
    await writeFile(storage('lh.bin'), big);
    await partial('lh-part.bin', 2_500_000);
    const g = await lftpDav('get -c lh.bin -o lh-part.bin');
    expect(g.code, g.stderr).toBe(0);
    expect(await shaOf(local('lh-part.bin'))).toBe(sha(big));

    // lftp sends only the tail with `Range:`; stored as is, the file became its last 3.5 MB.
    const head = big.subarray(0, 2_500_000);
    await writeFile(storage('lh-up.bin'), head);
    const p = await lftpDav('put -c big.bin -o lh-up.bin');
    expect(p.code).not.toBe(0);
    expect(p.stderr).toContain('400 Bad Request');
    expect(await shaOf(storage('lh-up.bin'))).toBe(sha(head));
    const raw = await dav()('PUT', '/lh-up.bin', { body: 'tail', headers: { Range: 'bytes=4-7/8' } });
    expect(raw.status).toBe(400);
    // A plain put (from byte 0) replaces it.
    const again = await lftpDav('put big.bin -o lh-up.bin');
    expect(again.code, again.stderr).toBe(0);
    expect(await shaOf(storage('lh-up.bin'))).toBe(sha(big));
    expect(await uploadLeftovers(s.dataDir)).toEqual([]);
  });
});

describe('cadaver', () => {
  it('mkcol, put, copy, move, propset/propget, lock/put/unlock, get, delete in one scripted session', async () => {
    await writeFile(local('cad.txt'), 'hello cadaver\n');
    const script = [
      'mkcol cdir', 'cd cdir', 'put cad.txt', 'copy cad.txt c2.txt', 'move c2.txt c3.txt',
      'propset cad.txt color blue', 'propget cad.txt color', 'lock cad.txt', 'put cad.txt', 'unlock cad.txt',
      'get c3.txt cad-back.txt', 'delete cad.txt', 'ls', 'quit',
    ];
    await writeFile(local('cad.script'), script.join('\n') + '\n');
    const r = await tool('sh', ['-c', `cadaver ${s.url}/dav/ < cad.script`]);
    expect(r.code, r.stdout + r.stderr).toBe(0);
    const out = r.stdout + r.stderr;
    expect(out).not.toMatch(/failed|Unrecognised|Could not/i);
    expect(out.match(/succeeded/g)).toHaveLength(11);
    expect(out).toContain('Value of color is: blue');
    expect(await readFile(local('cad-back.txt'), 'utf8')).toBe('hello cadaver\n');
    expect((await readdir(storage('cdir'))).sort()).toEqual(['c3.txt']);
    expect(await readFile(storage('cdir', 'c3.txt'), 'utf8')).toBe('hello cadaver\n');
    // Unlocked: anyone may write it again without a token.
    expect((await dav()('PUT', '/cdir/c3.txt', { body: 'x' })).status).toBe(204);
  });
});
