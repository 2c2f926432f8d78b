/**
 * Code review of /api/me, SSH public keys and public-key SFTP login: the defect found, shown against
 * a real server on loopback.
 *
 * - One SSH connection could make refused login attempts without end (AList's x/crypto and
 *   OpenSSH close it after 6): each unknown key or throttled password wrote a log line, and each
 *   attempt restarted the connection's login timer.
 */
import ssh2 from 'ssh2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from './harness.js';
import { createUser } from './auth-helpers.js';
import { PERM } from './fs-helpers.js';
import { MAX_AUTH_TRIES } from '../protocols/sftp/auth.js';

let s: TestServer;
let admin: string;

beforeAll(async () => {
  s = await startTestServer();
  admin = await s.login();
});
afterAll(async () => {
  await s?.close();
});

type Step = { type: 'publickey'; username: string; key: unknown } | false;

/**
 * One SSH connection that tries `steps[i]` as its i-th method (after ssh2's own first `none`);
 * resolves 'ready' or how it ended, with the number of methods the server let it try.
 */
function attempts(username: string, steps: (i: number) => Step): Promise<{ outcome: string; tried: number }> {
  let tried = 0;
  const c = new ssh2.Client();
  return new Promise((resolve) => {
    const done = (outcome: string) => resolve({ outcome, tried });
    c.once('ready', () => (c.end(), done('ready')));
    c.once('error', (e) => done(`error: ${e.message}`));
    c.once('close', () => done('closed'));
    c.connect({
      host: '127.0.0.1', port: s.sftpPort, username, readyTimeout: 20_000,
      authHandler: (_methods: unknown, _partial: unknown, next: (m: Step) => void) => next(tried < 200 ? steps(tried++) : false),
    } as ssh2.ConnectConfig);
  });
}

describe('refused SFTP login attempts on one connection', () => {
  it(`are cut off after ${MAX_AUTH_TRIES}: the connection is closed and logs no more`, async () => {
    await createUser(s, admin, { username: 'many', password: 'many-pass', permission: PERM.SFTP_READ });
    const token = await s.login('many', 'many-pass');
    const unknown = ssh2.utils.generateKeyPairSync('ed25519').private;
    const before = s.logs.length;
    const r = await attempts('many', () => ({ type: 'publickey', username: 'many', key: unknown }));
    // The server closed it: the client never ran out of keys to offer (200).
    expect(r.outcome).not.toBe('ready');
    expect(r.tried).toBeLessThanOrEqual(MAX_AUTH_TRIES + 1);
    const refusals = s.logs.slice(before).filter((l) => l.includes('sftp login refused'));
    expect(refusals.length).toBe(MAX_AUTH_TRIES);

    // Fewer refusals than that leave the connection to log in with a registered key (a query that
    // the server answers "this key would do" is no refusal).
    const known = ssh2.utils.generateKeyPairSync('ed25519');
    expect(await s.api('/api/me/sshkey/add', { token, body: { title: 'known', key: known.public } })).toMatchObject({ code: 200 });
    const ok = await attempts('many', (i) => ({ type: 'publickey', username: 'many', key: i < MAX_AUTH_TRIES - 1 ? unknown : known.private }));
    expect(ok).toEqual({ outcome: 'ready', tried: MAX_AUTH_TRIES });
  });
});
