/**
 * The real OpenSSH `sftp` client, driven in batch mode against a server on loopback. Keys come from
 * ssh-keygen in a temp dir; password logins go through sshpass. A missing tool fails with the
 * install hint (never a silent skip). Every run is bounded in time.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import ssh2 from 'ssh2';

export function requireSftpTools(extra: Array<[bin: string, pkg: string]> = []): void {
  for (const [bin, pkg] of [['sftp', 'openssh-client'], ['ssh-keygen', 'openssh-client'], ['ssh-keyscan', 'openssh-client'], ['sshpass', 'sshpass'], ...extra]) {
    if (spawnSync('sh', ['-c', `command -v ${bin}`]).status !== 0) throw new Error(`${bin} is not installed: run \`apt-get install -y ${pkg}\``);
  }
}

export interface KeyPair {
  /** Private key file (for -i). */
  path: string;
  /** authorized_keys line. */
  pub: string;
}

export async function makeKey(dir: string, name: string, type: 'ed25519' | 'rsa' | 'ecdsa' = 'ed25519'): Promise<KeyPair> {
  const path = join(dir, name);
  const r = spawnSync('ssh-keygen', ['-q', '-t', type, ...(type === 'rsa' ? ['-b', '2048'] : []), '-N', '', '-C', name, '-f', path]);
  if (r.status !== 0) throw new Error(`ssh-keygen failed: ${r.stderr.toString()}`);
  return { path, pub: (await readFile(path + '.pub', 'utf8')).trim() };
}

export interface SftpLogin {
  port: number;
  user: string;
  /** Private key file: publickey only. */
  key?: string;
  /** Password: password/keyboard-interactive through sshpass. */
  password?: string;
  /** Extra `sftp` arguments (e.g. ['-c', 'aes128-gcm@openssh.com'], ['-R', '8']). */
  args?: string[];
}

const COMMON = ['-o', 'StrictHostKeyChecking=no', '-o', 'UserKnownHostsFile=/dev/null', '-o', 'LogLevel=ERROR', '-o', 'ConnectTimeout=20'];

/** argv for one batch run (program first). */
export function sftpArgv(login: SftpLogin, batchFile: string): string[] {
  const auth = login.key
    ? ['-o', 'IdentitiesOnly=yes', '-o', 'PreferredAuthentications=publickey', '-i', login.key]
    : ['-o', 'PubkeyAuthentication=no', '-o', 'PreferredAuthentications=keyboard-interactive,password', '-o', 'NumberOfPasswordPrompts=1'];
  const sftp = [
    'sftp',
    // BatchMode=no must come before -b (which turns BatchMode on) for sshpass to answer the prompt.
    ...(login.password !== undefined ? ['-o', 'BatchMode=no'] : []),
    // Caller's args first: for `-o` options ssh takes the first value it sees.
    '-b', batchFile, '-P', String(login.port), ...(login.args ?? []), ...COMMON, ...auth, `${login.user}@127.0.0.1`,
  ];
  return login.password !== undefined ? ['sshpass', '-p', login.password, ...sftp] : sftp;
}

export interface SftpResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Start a batch run without waiting (the kill-mid-upload test needs the child). */
export async function spawnSftp(login: SftpLogin, commands: string[], cwd?: string): Promise<ChildProcess> {
  const file = join(tmpdir(), `treegate-sftp-batch-${process.pid}-${randomUUID()}`);
  await writeFile(file, commands.join('\n') + '\n');
  const [cmd, ...argv] = sftpArgv(login, file);
  const child = spawn(cmd!, argv, { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
  child.once('close', () => void rm(file, { force: true }));
  return child;
}

/** Run `commands` as an sftp batch (a `-` prefix lets one fail without aborting) and collect output. */
export async function runSftp(login: SftpLogin, commands: string[], opts: { cwd?: string; timeoutMs?: number } = {}): Promise<SftpResult> {
  const child = await spawnSftp(login, commands, opts.cwd);
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (b: Buffer) => (stdout += b.toString()));
  child.stderr!.on('data', (b: Buffer) => (stderr += b.toString()));
  const timeoutMs = opts.timeoutMs ?? 60_000;
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      stderr += `\n[test] sftp killed after ${timeoutMs} ms`;
      child.kill('SIGKILL');
    }, timeoutMs);
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/**
 * Run any command to completion, bounded in time. Async on purpose: the server under test runs in
 * this process, so spawnSync would freeze it and the client would wait for nothing.
 */
export function run(cmd: string, args: string[], timeoutMs = 30_000): Promise<SftpResult> {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (b: Buffer) => (stdout += b.toString()));
    child.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/** The server's host key of `type` as ssh-keyscan sees it ("type base64"). */
export async function scanHostKey(port: number, type = 'ed25519'): Promise<string> {
  const r = await run('ssh-keyscan', ['-p', String(port), '-t', type, '127.0.0.1'], 20_000);
  const line = r.stdout.split('\n').find((l) => l && !l.startsWith('#'));
  if (!line) throw new Error(`ssh-keyscan found no ${type} key: ${r.stderr}`);
  return line.split(' ').slice(1, 3).join(' ');
}

/**
 * ssh2's own SFTP client, for checks the OpenSSH client cannot show (exact status codes: its
 * `ls`/`get` print "not found" for any failed stat) and for keyboard-interactive with a TOTP code.
 */
export async function withSsh2Sftp<T>(
  opts: { port: number; username: string; privateKey?: Buffer; password?: string; answers?: (prompt: string) => string },
  fn: (sftp: import('ssh2').SFTPWrapper, client: import('ssh2').Client) => Promise<T>,
): Promise<T> {
  const { Client } = (await import('ssh2')).default;
  const client = new Client();
  try {
    await new Promise<void>((resolve, reject) => {
      client.once('ready', () => resolve());
      client.once('error', reject);
      client.on('keyboard-interactive', (_n, _i, _l, prompts, finish) => finish(prompts.map((p) => opts.answers?.(p.prompt) ?? '')));
      client.connect({
        host: '127.0.0.1', port: opts.port, username: opts.username, privateKey: opts.privateKey, password: opts.password,
        tryKeyboard: !!opts.answers, readyTimeout: 20_000,
      });
    });
    const sftp = await new Promise<import('ssh2').SFTPWrapper>((resolve, reject) => client.sftp((e, s) => (e ? reject(e) : resolve(s))));
    return await fn(sftp, client);
  } finally {
    client.end();
  }
}

type SftpCb<T> = (err: (Error & { code?: number }) | null | undefined, v: T) => void;

/** An ssh2 SFTP call as a promise (rejects with the SFTP status error). */
export const promised = <T>(call: (cb: SftpCb<T>) => void) => new Promise<T>((res, rej) => call((e, v) => (e ? rej(e) : res(v))));

/** WRITE `data` at `off` through an open handle. */
export function writeAt(sftp: import('ssh2').SFTPWrapper, h: Buffer, off: number, data: string | Buffer): Promise<void> {
  const b = Buffer.from(data);
  return promised<void>((cb) => sftp.write(h, b, 0, b.length, off, (e) => cb(e, undefined)));
}

/** READ up to `len` bytes at `off` through an open handle. */
export const readAt = (sftp: import('ssh2').SFTPWrapper, h: Buffer, off: number, len: number) =>
  promised<Buffer>((cb) => sftp.read(h, Buffer.alloc(len), 0, len, off, (e, n, b) => cb(e, b.subarray(0, n))));

/** The SFTP status a READ at `off` answered (undefined when it returned bytes). */
export const readStatus = (sftp: import('ssh2').SFTPWrapper, h: Buffer, off: number) =>
  statusCode((cb) => sftp.read(h, Buffer.alloc(4), 0, 4, off, (e) => cb(e)));

/** CLOSE a handle. */
export const closeHandle = (sftp: import('ssh2').SFTPWrapper, h: Buffer) => promised<void>((cb) => sftp.close(h, (e) => cb(e, undefined)));

/** The SFTP status code a failing call answered (undefined on success). */
export function statusCode(call: (cb: (err: (Error & { code?: number }) | null | undefined) => void) => void): Promise<number | undefined> {
  return new Promise((resolve) => call((err) => resolve(err ? err.code : undefined)));
}

/** Protocol-neutral outcome used by test/meta.cross.test.ts. */
export type CrossOutcome = 'ok' | 'denied' | 'not_found';

function crossOutcome(err: (Error & { code?: unknown }) | null | undefined): CrossOutcome {
  if (!err) return 'ok';
  const { STATUS_CODE } = ssh2.utils.sftp;
  if (err.code === STATUS_CODE.PERMISSION_DENIED) return 'denied';
  if (err.code === STATUS_CODE.NO_SUCH_FILE) return 'not_found';
  throw new Error(`unexpected SFTP answer ${String(err.code)} ${err.message}`);
}

/**
 * The SFTP driver for the cross-protocol meta scenario: one ssh2 connection (password login) and
 * each operation mapped to SFTP requests. SFTP cannot send a path password and has no copy.
 */
export async function connectSftpSurface(port: number, username: string, password: string) {
  const client = new ssh2.Client();
  await new Promise<void>((resolve, reject) => {
    client.once('ready', () => resolve());
    client.once('error', reject);
    client.connect({ host: '127.0.0.1', port, username, password, readyTimeout: 20_000 });
  });
  const sftp = await new Promise<import('ssh2').SFTPWrapper>((res, rej) => client.sftp((e, s) => (e ? rej(e) : res(s))));
  type Cb = (err: (Error & { code?: unknown }) | null | undefined) => void;
  const call = (fn: (cb: Cb) => void) =>
    new Promise<CrossOutcome>((resolve, reject) =>
      fn((err) => {
        try {
          resolve(crossOutcome(err));
        } catch (e) {
          reject(e);
        }
      }),
    );
  const name = (p: string) => p.replace(/^.*\//, '');
  const dir = (p: string) => p.replace(/\/[^/]*$/, '') || '/';
  return {
    sendsPassword: false,
    async list(path: string) {
      let names: string[] = [];
      const outcome = await call((cb) => sftp.readdir(path, (err, list) => ((names = (list ?? []).map((e) => e.filename).sort()), cb(err))));
      return { outcome, names };
    },
    async read(path: string) {
      let body = '';
      const outcome = await call((cb) => sftp.readFile(path, (err, data) => ((body = data ? data.toString() : ''), cb(err))));
      return { outcome, body };
    },
    upload: (path: string, body: string) => call((cb) => sftp.writeFile(path, body, cb)),
    mkdir: (path: string) => call((cb) => sftp.mkdir(path, cb)),
    rename: (path: string, newName: string) => call((cb) => sftp.rename(path, `${dir(path)}/${newName}`, cb)),
    move: (path: string, dstDir: string) => call((cb) => sftp.rename(path, `${dstDir}/${name(path)}`, cb)),
    remove: (path: string) => call((cb) => sftp.unlink(path, cb)),
    readme: async () => undefined,
    close: async () => void client.end(),
  };
}

/** Leftovers an upload may leave: driver temp files in DATA/storage, SFTP spill files in DATA/tmp. */
export async function uploadLeftovers(dataDir: string): Promise<string[]> {
  const inStorage = (await readdir(join(dataDir, 'storage'), { recursive: true })).filter((n) => n.includes('.treegate-upload-'));
  const inTmp = (await readdir(join(dataDir, 'tmp')).catch(() => [])).filter((n) => n.startsWith('sftp-'));
  return [...inStorage, ...inTmp];
}

/** Whether `cond` came true within `ms` (checked every 100 ms, and once more at the end). */
export async function until(cond: () => Promise<boolean>, ms: number): Promise<boolean> {
  for (const end = Date.now() + ms; Date.now() < end; await new Promise((r) => setTimeout(r, 100))) if (await cond()) return true;
  return cond();
}

/** A real sshfs mount (FUSE: needs root and /dev/fuse) of a test server's tree, as admin by key. */
export interface SshfsMount {
  /** The temp folder holding the mount point and the key. */
  work: string;
  mnt: string;
  /** Unmount and remove `work`. */
  close(): Promise<void>;
}

/**
 * Mount `/` of the server on SFTP port `port` with sshfs. `addKey` registers the public key for the
 * admin (through /api/me/sshkey/add); the login is by that key, as a user's automount would be.
 */
export async function mountSshfs(port: number, addKey: (pub: string) => Promise<void>, prefix = 'tg-sshfs-'): Promise<SshfsMount> {
  requireSftpTools([['sshfs', 'sshfs'], ['fusermount3', 'fuse3']]);
  if (process.getuid?.() !== 0) throw new Error('the sshfs test mounts a file system and must run as root');
  if (!existsSync('/dev/fuse')) throw new Error('/dev/fuse is missing: sshfs needs FUSE');
  const work = await mkdtemp(join(tmpdir(), prefix));
  const mnt = join(work, 'mnt');
  await mkdir(mnt);
  const key = await makeKey(work, 'admin_key');
  await addKey(key.pub);
  const opts = [`IdentityFile=${key.path}`, 'IdentitiesOnly=yes', 'StrictHostKeyChecking=no', 'UserKnownHostsFile=/dev/null', 'BatchMode=yes'];
  const m = await run('sshfs', ['-p', String(port), '-o', opts.join(','), 'admin@127.0.0.1:/', mnt]);
  if (m.code !== 0) {
    await rm(work, { recursive: true, force: true });
    throw new Error(`sshfs failed: ${m.stderr}`);
  }
  return {
    work,
    mnt,
    close: async () => {
      await run('fusermount3', ['-u', mnt], 60_000);
      await rm(work, { recursive: true, force: true });
    },
  };
}
