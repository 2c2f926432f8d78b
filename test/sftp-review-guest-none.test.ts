/**
 * AList's SFTP server lets the guest in as `guest` with no credentials (SSH method `none`) while
 * the guest is enabled with the SFTP permission, as REST serves the guest without a token. treegate
 * refused every `none`, so such a guest had no way in over SFTP.
 */
import ssh2 from 'ssh2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from './harness.js';
import { PERM, putFile } from './fs-helpers.js';

let s: TestServer;
let admin: string;
let guestId: number;

beforeAll(async () => {
  s = await startTestServer();
  admin = await s.login();
  expect((await putFile(s, admin, '/public.txt', 'for everyone')).code).toBe(200);
  guestId = (await s.running.core.accounts.guest())!.id;
});
afterAll(async () => {
  await s?.close();
});

const setGuest = (disabled: boolean, permission: number) =>
  s.api('/api/admin/user/update', { token: admin, body: { id: guestId, username: 'guest', role: 1, disabled, permission, base_path: '/' } });

/** Connects with no credentials (ssh2 then offers only `none`); the names in `/`, or the error. */
function listAsNobody(username: string): Promise<string[] | Error> {
  return new Promise((resolve) => {
    const c = new ssh2.Client();
    c.on('error', (e) => resolve(e));
    c.on('ready', () =>
      c.sftp((e, sftp) => {
        if (e) return (c.end(), resolve(e));
        sftp.readdir('/', (err, list) => {
          c.end();
          resolve(err ?? list.map((f) => f.filename).sort());
        });
      }),
    );
    c.connect({ host: '127.0.0.1', port: s.sftpPort, username, readyTimeout: 20_000 });
  });
}

describe('SFTP login of the guest', () => {
  it('enabled with the SFTP permission: in as `guest` with no credentials', async () => {
    expect((await setGuest(false, PERM.SFTP_READ)).code).toBe(200);
    expect(await listAsNobody('guest')).toEqual(['public.txt']);
  });

  it('disabled, or without the SFTP permission, or another name: refused', async () => {
    expect((await setGuest(false, PERM.SFTP_READ)).code).toBe(200);
    expect(await listAsNobody('admin')).toBeInstanceOf(Error);
    expect((await setGuest(false, 0)).code).toBe(200);
    expect(await listAsNobody('guest')).toBeInstanceOf(Error);
    expect((await setGuest(true, PERM.SFTP_READ)).code).toBe(200);
    expect(await listAsNobody('guest')).toBeInstanceOf(Error);
  });
});
