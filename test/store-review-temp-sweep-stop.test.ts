/**
 * Defects found by reading the config, start-up and data folder code (config.ts, server.ts, store/,
 * cli.ts), each proven against the real server: the built CLI as a process where it is about
 * start-up or stop, in-process on loopback otherwise, on temp DATA dirs.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, rm, utimes, writeFile } from 'node:fs/promises';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { CLI, cliEnv } from './clients/process.js';
import { startTestServer, type TestServer } from './harness.js';
import { ok, putFile } from './fs-helpers.js';
import { holdPutsOf, settle, until } from './tasks-helpers.js';

const dirs: string[] = [];
const children: ChildProcess[] = [];
async function temp(): Promise<string> {
  const d = await mkdtemp(join(tmpdir(), 'treegate-fix-store-'));
  dirs.push(d);
  return d;
}
afterEach(async () => {
  for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
});

interface Launched {
  child: ChildProcess;
  output: () => string;
  stderr: () => string;
  exited: Promise<number | null>;
}

function launch(args: string[], env: NodeJS.ProcessEnv): Launched {
  const child = spawn(process.execPath, [CLI, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  let all = '';
  let err = '';
  child.stdout!.on('data', (b: Buffer) => (all += b.toString()));
  child.stderr!.on('data', (b: Buffer) => ((err += b.toString()), (all += b.toString())));
  const exited = new Promise<number | null>((res) => child.once('exit', (code) => res(code)));
  return { child, output: () => all, stderr: () => err, exited };
}

/** Resolves once the output matches `re` (bounded), with the match. */
async function waitFor(l: Launched, re: RegExp, ms = 30_000): Promise<RegExpExecArray> {
  return until(`${re} in the output`, async () => re.exec(l.output()) ?? undefined, ms, 20).catch((e: Error) => {
    throw new Error(`${e.message}:\n${l.output()}`);
  });
}

describe('config: temp_dir', () => {
  it('an existing temp_dir that is a file is refused in one line naming the setting and the path, before anything is created', async () => {
    const root = await temp();
    const file = join(root, 'not-a-folder');
    await writeFile(file, 'x');
    const data = join(root, 'data');
    const r = launch(['server', '--data', data], cliEnv({ TREEGATE_TEMP_DIR: file, TREEGATE_SFTP_ENABLE: 'false' }));
    const code = await Promise.race([r.exited, waitFor(r, /treegate ready/).then(() => 'started' as const)]);
    expect(code, r.output()).toBe(1);
    expect(r.stderr().trim().split('\n')).toEqual([`treegate: temp_dir (from TREEGATE_TEMP_DIR): ${file} exists and is not a directory`]);
    // Refused like any config value: no data dir, admin or printed password.
    expect(existsSync(data)).toBe(false);
  });

  it("two instances sharing one temp_dir: the second's start-up leaves the first's spooled uploads alone", async () => {
    const shared = await temp();
    const env = { TREEGATE_TEMP_DIR: shared, TREEGATE_SFTP_ENABLE: 'false' };
    const a = await startTestServer({ env, dataDir: await temp() });
    let b: TestServer | undefined;
    try {
      const admin = await a.login();
      ok(await a.api('/api/admin/setting/save', { token: admin, body: [{ key: 'upload_task_threads_num', value: '1' }] }));
      // The only upload worker is held by a first upload; a second one waits in the queue, its body
      // spooled in temp_dir.
      const hold = holdPutsOf(a, '/held.txt');
      try {
        ok(await putFile(a, admin, '/held.txt', 'first', { 'as-task': 'true' }));
        await until('the first upload to hold the worker', async () => (hold.held() ? true : undefined), 10_000, 5);
        ok(await putFile(a, admin, '/queued.txt', 'second', { 'as-task': 'true' }));
        b = await startTestServer({ env, dataDir: await temp() });
        hold.release();
        const done = await settle(a, admin, 'upload');
        expect(done.map((t) => [t.name, t.state, t.error])).toEqual(
          expect.arrayContaining([[expect.stringContaining('queued.txt'), 2, '']]),
        );
        expect(existsSync(join(a.dataDir, 'storage', 'queued.txt'))).toBe(true);
      } finally {
        hold.restore();
      }
    } finally {
      await b?.close();
      await a.close();
    }
  });
});

describe('start-up sweeps the temp files a kill -9 left in DATA', () => {
  it('of every temp-then-rename writer (config.json, server.pid, control files, host keys), only its own names of dead writers', async () => {
    const data = join(await temp(), 'data');
    await mkdir(join(data, 'ssh'), { recursive: true });
    // A pid that is gone: a child that has exited.
    const dead = spawn(process.execPath, ['-e', '0']);
    await new Promise((r) => dead.once('exit', r));
    const pid = dead.pid!;
    const uuid = '0b5f3b2e-4c1d-4e7a-9a0b-2f6c8d9e1a3b';
    const leftovers = [
      `config.json.${pid}.1.tmp`,
      `server.pid.${pid}.${uuid}.tmp`,
      `server.pid.${pid}.3.tmp`,
      `control-${uuid}.request.${pid}.1.tmp`,
      `control-${uuid}.result.${pid}.2.tmp`,
      `server.pid.${uuid}.stale`,
      'ssh/ssh_host_ed25519_key.tmp-' + pid,
    ];
    // Not ours to remove: a live writer's temp file, and user files that only look alike.
    const kept = [`config.json.${process.pid}.1.tmp`, `notes.json.${pid}.1.tmp`, `config.json.${pid}.bak`];
    for (const n of [...leftovers, ...kept]) await writeFile(join(data, n), '{}');
    const old = new Date(Date.now() - 3600_000);
    await utimes(join(data, `server.pid.${uuid}.stale`), old, old);

    const r = launch(['server', '--data', data], cliEnv({ TREEGATE_SFTP_ENABLE: 'true' }));
    await waitFor(r, /treegate ready/);
    r.child.kill('SIGTERM');
    expect(await r.exited, r.output()).toBe(0);
    const left = [...(await readdir(data)), ...(await readdir(join(data, 'ssh'))).map((n) => `ssh/${n}`)];
    expect(left.filter((n) => leftovers.includes(n))).toEqual([]);
    expect(left).toEqual(expect.arrayContaining(kept));
  });
});

describe('graceful stop', () => {
  it('SIGTERM closes a connection that has not sent a request yet at once, instead of serving it until the force-close', async () => {
    const data = join(await temp(), 'data');
    const r = launch(['server', '--data', data], cliEnv({ TREEGATE_SFTP_ENABLE: 'false' }));
    const port = Number((await waitFor(r, /treegate ready: http:\/\/[^:]+:(\d+)/))[1]);
    // A browser's preconnect: connected, nothing sent yet.
    const socket = connect(port, '127.0.0.1');
    await new Promise((res) => socket.once('connect', res));
    let got = '';
    socket.on('data', (b: Buffer) => (got += b.toString()));
    socket.on('error', () => undefined); // a reset is a close too
    const closed = new Promise<void>((res) => socket.once('close', () => res()));
    r.child.kill('SIGTERM');
    // The stop is under way (its log line comes after close() began); only then the request goes out.
    await waitFor(r, /"msg":"stopping"/);
    if (!socket.destroyed) socket.write('GET /ping HTTP/1.1\r\nHost: x\r\n\r\n');
    await closed;
    expect(got).toBe(''); // closed without serving a request the client sent after the stop began
    expect(await r.exited, r.output()).toBe(0);
  });

  it('a download under way at SIGTERM: once it ends, its keep-alive connection is closed at once, not held until its keep-alive timeout', async () => {
    const data = join(await temp(), 'data');
    const size = 32 << 20;
    await mkdir(join(data, 'storage'), { recursive: true });
    await writeFile(join(data, 'storage', 'big.bin'), Buffer.alloc(size, 7));
    const r = launch(['server', '--data', data], cliEnv({ TREEGATE_SFTP_ENABLE: 'false', TREEGATE_ADMIN_PASSWORD: 'fix-store-password' }));
    const port = Number((await waitFor(r, /treegate ready: http:\/\/[^:]+:(\d+)/))[1]);
    const socket = connect(port, '127.0.0.1');
    await new Promise((res) => socket.once('connect', res));
    socket.on('error', () => undefined);
    const closed = new Promise<void>((res) => socket.once('close', () => res()));
    const auth = `Basic ${Buffer.from('admin:fix-store-password').toString('base64')}`;
    let head = Buffer.alloc(0);
    let bodyStart = -1;
    let length = -1;
    /** Bytes after the first answer's headers (its body, then anything more). */
    let after = 0;
    const chunk = (b: Buffer) => {
      if (bodyStart >= 0) return void (after += b.length);
      head = Buffer.concat([head, b]);
      if (!head.includes('\r\n\r\n')) return;
      bodyStart = head.indexOf('\r\n\r\n') + 4;
      length = Number(/content-length: (\d+)/i.exec(head.subarray(0, bodyStart).toString())![1]);
      after = head.length - bodyStart;
    };
    socket.on('data', chunk);
    socket.write(`GET /dav/big.bin HTTP/1.1\r\nHost: x\r\nAuthorization: ${auth}\r\n\r\n`);
    // The answer is under way (headers in, with Connection: keep-alive); the client stops reading.
    await until('the headers', async () => (bodyStart > 0 ? true : undefined), 10_000, 5);
    socket.pause();
    expect(head.subarray(0, bodyStart).toString()).toMatch(/connection: keep-alive/i);
    r.child.kill('SIGTERM');
    await waitFor(r, /"msg":"stopping"/);
    socket.resume();
    await until('the whole body', async () => (after >= length ? true : undefined), 30_000, 5);
    expect(after).toBe(size);
    expect(length).toBe(size);
    // The download is complete; a next request on the same connection finds it closed, unserved.
    if (!socket.destroyed) socket.write('GET /ping HTTP/1.1\r\nHost: x\r\n\r\n');
    await closed;
    expect(after).toBe(size); // nothing more came: no answer to the request sent after the download
    expect(await r.exited, r.output()).toBe(0);
  });
});
