/**
 * Defects found by reading the store, settings, config, bootstrap, CLI and admin API code, each
 * proven against the real server (in-process on loopback, or the built CLI) on a temp DATA dir.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { chown, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ADMIN_PASSWORD, startTestServer, type TestServer } from './harness.js';
import { withSsh2Sftp } from './clients/sftp.js';
import { CLI, cliEnv, runCli } from './clients/process.js';

const dirs: string[] = [];
async function temp(): Promise<string> {
  const d = await mkdtemp(join(tmpdir(), 'treegate-review-store-'));
  dirs.push(d);
  return d;
}
afterEach(async () => {
  for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
});

describe('config: idle timeouts', () => {
  it('an sftp.idle_timeout longer than a timer holds (30 days) is refused naming the key, not every SFTP login closed at once', async () => {
    const data = await temp();
    await writeFile(join(data, 'config.json'), JSON.stringify({ sftp: { idle_timeout: 30 * 86400 } }));
    let s: TestServer | undefined;
    let refused = '';
    try {
      s = await startTestServer({ dataDir: data });
    } catch (e) {
      refused = (e as Error).message;
    }
    if (s) {
      // It started: what the setting did to a logged-in client that waits a moment before its first request.
      const got = await withSsh2Sftp({ port: s.sftpPort, username: 'admin', password: ADMIN_PASSWORD }, async (sftp) => {
        await new Promise((r) => setTimeout(r, 300));
        return new Promise<string>((res) => sftp.readdir('/', (e) => res(e ? `error ${e.message}` : 'listed')));
      }).catch((e: Error) => `connection: ${e.message}`);
      await s.close();
      expect.fail(`started with sftp.idle_timeout 30 days; a client's first request after 300 ms: ${got}`);
    }
    expect(refused).toMatch(/^sftp\.idle_timeout \(from .*config\.json\): must be 1-2147483 seconds/);
  });
});

describe('config: saving a generated jwt_secret into an existing config file', () => {
  it("keeps what the admin wrote inside its sections: a comment, and a mistyped key the warning names", async () => {
    const data = await temp();
    const file = join(data, 'config.json');
    await writeFile(file, JSON.stringify({ '//': 'top note', http: { '//': 'behind nginx on :443', idle_timout: 60 }, sftp: { enable: false } }));
    const s = await startTestServer({ dataDir: data });
    try {
      expect(s.logs.join('\n')).toContain('unknown keys ignored (typos?): http.idle_timout');
      const saved = JSON.parse(await readFile(file, 'utf8')) as Record<string, Record<string, unknown>>;
      expect(typeof saved.jwt_secret).toBe('string');
      expect(saved['//']).toBe('top note');
      // The typo the warning points at is still there to be fixed, and the note beside it.
      expect(saved.http).toMatchObject({ '//': 'behind nginx on :443', idle_timout: 60, idle_timeout: 120 });
      expect(saved.sftp).toMatchObject({ enable: false, port: 5222 });
    } finally {
      await s.close();
    }
  });
});

describe('`treegate admin set` run as root beside a service that runs as its own user', () => {
  const NOBODY = 65534;
  /** `treegate server` as the service user; resolves with its HTTP port once ready, or rejects with its output. */
  function serveAsNobody(data: string): Promise<{ child: ChildProcess; http: number }> {
    const child = spawn(process.execPath, [CLI, 'server', '--data', data], {
      env: cliEnv({ TREEGATE_ADMIN_PASSWORD: 'first-password', TREEGATE_SFTP_ENABLE: 'false' }), uid: NOBODY, gid: NOBODY, stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    return new Promise((res, rej) => {
      const timer = setTimeout(() => rej(new Error(`no ready line:\n${out}`)), 30_000);
      const onData = (b: Buffer) => {
        out += b.toString();
        const m = /treegate ready: http:\/\/[^:]+:(\d+)/.exec(out);
        if (m) clearTimeout(timer), res({ child, http: Number(m[1]) });
      };
      child.stdout.on('data', onData);
      child.stderr.on('data', onData);
      child.once('exit', (code) => (clearTimeout(timer), rej(new Error(`server exited with ${code}: ${out.trim().split('\n').pop()}`))));
    });
  }
  const stop = (child: ChildProcess) => new Promise((r) => (child.once('exit', r), child.kill('SIGTERM')));
  const login = async (http: number, password: string) =>
    ((await (await fetch(`http://127.0.0.1:${http}/api/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ username: 'admin', password }) })).json()) as { code: number }).code;

  it('while it is stopped: the store keeps its owner and the service starts again with the new password', async () => {
    if (process.getuid?.() !== 0) throw new Error('this test runs the server as another user and must run as root');
    const data = await temp();
    await chown(data, NOBODY, NOBODY);
    await stop((await serveAsNobody(data)).child); // the first start
    const set = await runCli(['admin', 'set', 'second-password', '--data', data], cliEnv());
    expect(set.stderr).toBe('');
    expect((await stat(join(data, 'store.json'))).uid).toBe(NOBODY);
    const s = await serveAsNobody(data);
    try {
      expect(await login(s.http, 'second-password')).toBe(200);
    } finally {
      await stop(s.child);
    }
  });

  it('while it runs: the server takes the change at once (it discarded the request as not its own)', async () => {
    if (process.getuid?.() !== 0) throw new Error('this test runs the server as another user and must run as root');
    const data = await temp();
    await chown(data, NOBODY, NOBODY);
    const s = await serveAsNobody(data);
    try {
      const set = await runCli(['admin', 'set', 'second-password', '--data', data], cliEnv());
      expect(set.stderr).toBe('');
      expect(set.stdout).toContain('admin password updated');
      expect(await login(s.http, 'second-password')).toBe(200);
    } finally {
      await stop(s.child);
    }
  }, 40_000);
});
