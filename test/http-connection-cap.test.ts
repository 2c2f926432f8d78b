/**
 * HTTP connections are capped at half the process's open-files limit (src/open-files.ts): clients
 * holding connections used up every descriptor, and meanwhile SFTP and the store failed with EMFILE.
 * Past the cap, new HTTP connections are closed at once and the rest of the server works on.
 */
import { connect, type Socket } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { cliEnv, startServerProcess, tempDataDirs, type ServerProcess } from './clients/process.js';
import { withSsh2Sftp } from './clients/sftp.js';
import { httpConnectionCap, openFilesLimit } from '../src/open-files.js';

const dirs = tempDataDirs('treegate-conn-cap-');
const PASSWORD = 'conn-cap-password-1';
let server: ServerProcess | undefined;
const held: Socket[] = [];

afterAll(async () => {
  for (const s of held) s.destroy();
  if (server && server.child.exitCode === null) server.child.kill('SIGTERM');
  await server?.exited;
  await dirs.cleanup();
});

/** Open a connection and keep it (sending nothing); resolves once connected, or closed first. */
const hold = (port: number) =>
  new Promise<Socket>((resolve) => {
    const s = connect(port, '127.0.0.1', () => resolve(s));
    s.on('error', () => resolve(s));
    held.push(s);
  });

describe('the HTTP connection cap', () => {
  it('reads the soft limit from /proc/self/limits', () => {
    const text = 'Limit                     Soft Limit           Hard Limit           Units     \nMax open files            1024                 524288               files     \n';
    expect(openFilesLimit(text)).toBe(1024);
    expect(openFilesLimit('Max open files            unlimited            unlimited            files     \n')).toBeUndefined();
    expect(openFilesLimit('')).toBeUndefined();
    expect(httpConnectionCap()).toBeGreaterThanOrEqual(32);
  });

  it('300 idle connections to a server limited to 256 open files leave SFTP and uploads working', async () => {
    const data = await dirs.next();
    server = await startServerProcess(['--data', data], cliEnv({ TREEGATE_ADMIN_PASSWORD: PASSWORD }), 30_000, ['prlimit', '--nofile=256:256', '--', process.execPath]);
    const sockets = await Promise.all(Array.from({ length: 300 }, () => hold(server!.http)));
    // The server closes those past its cap (128) at once.
    const closed = () => sockets.filter((s) => s.destroyed || s.readyState !== 'open').length;
    for (let i = 0; i < 100 && closed() < 300 - 128; i++) await new Promise((r) => setTimeout(r, 50));
    expect(closed()).toBeGreaterThanOrEqual(300 - 128);
    // With the connections past the cap gone, descriptors are left: an SFTP login and upload work.
    const listed = await withSsh2Sftp({ port: server.sftp, username: 'admin', password: PASSWORD }, async (sftp) => {
      await new Promise<void>((resolve, reject) => sftp.writeFile('/during-flood.txt', 'still works', (e) => (e ? reject(e) : resolve())));
      return new Promise<string[]>((resolve, reject) => sftp.readdir('/', (e, list) => (e ? reject(e) : resolve(list.map((x) => x.filename)))));
    });
    expect(listed).toContain('during-flood.txt');
    expect(server.output()).toMatch(/HTTP connection limit reached/);
    for (const s of held.splice(0)) s.destroy();
    // And HTTP serves again once they are gone.
    const pong = await fetch(`http://127.0.0.1:${server.http}/ping`);
    expect(await pong.text()).toBe('pong');
  }, 60_000);
});
