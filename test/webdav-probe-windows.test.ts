/**
 * Client-emulation probe (Windows Mini-Redirector):
 * - `creationdate` must be RFC 3339 *without* a fraction of a second. Windows 7 to 11
 *   (Microsoft-WebDAV-MiniRedir) cannot parse `2024-01-02T03:04:05.678Z`, though RFC 3339 allows
 *   it; treegate sent the milliseconds.
 * - Explorer's copy sets Win32CreationTime, Win32LastAccessTime, Win32LastModifiedTime and
 *   Win32FileAttributes with PROPPATCH (each must be 200, or the copy fails), and later reads them
 *   back, preferring Win32LastModifiedTime to getlastmodified. treegate kept the PROPPATCHed
 *   Win32LastModifiedTime as a frozen dead property, so once the file was rewritten (by any client)
 *   Windows still saw the old date.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_PASSWORD, startTestServer, type TestServer } from './harness.js';
import { davClient, type DavClient } from './clients/webdav.js';

let ts: TestServer;
let dav: DavClient;

beforeAll(async () => {
  ts = await startTestServer({ env: { TREEGATE_SFTP_ENABLE: 'false' } });
  dav = davClient(ts.url, 'admin', ADMIN_PASSWORD);
});
afterAll(async () => {
  await ts?.close();
});

const RFC3339_SECONDS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$/;
const creationDates = (body: string) => [...body.matchAll(/<D:creationdate>([^<]*)<\/D:creationdate>/g)].map((m) => m[1]!);

describe('creationdate as Windows can read it', () => {
  it('has whole seconds in allprop, in named-prop PROPFINDs and for the root (Translate: f, as Windows asks)', async () => {
    expect((await dav('MKCOL', '/cd')).status).toBe(201);
    for (let i = 0; i < 5; i++) expect((await dav('PUT', `/cd/f${i}.txt`, { body: `f${i}` })).status).toBe(201);

    const all = await dav('PROPFIND', '/cd/', { headers: { Depth: '1', Translate: 'f' } });
    expect(all.status).toBe(207);
    const named = await dav('PROPFIND', '/cd/', {
      headers: { Depth: '1' },
      body: '<?xml version="1.0" encoding="utf-8" ?><D:propfind xmlns:D="DAV:"><D:prop><D:creationdate/><D:getlastmodified/></D:prop></D:propfind>',
    });
    expect(named.status).toBe(207);
    const root = await dav('PROPFIND', '', { headers: { Depth: '0', Translate: 'f' } });
    expect(root.status).toBe(207);

    const dates = [...creationDates(all.body), ...creationDates(named.body), ...creationDates(root.body)];
    expect(dates.length).toBe(6 + 6 + 1);
    for (const d of dates) {
      expect(d).toMatch(RFC3339_SECONDS);
      expect(Number.isNaN(Date.parse(d))).toBe(false);
    }
  });
});

const OLD = 'Tue, 01 Jan 2019 10:00:00 GMT';
const win32Set = (modified: string) =>
  '<?xml version="1.0" encoding="utf-8" ?><D:propertyupdate xmlns:D="DAV:" xmlns:Z="urn:schemas-microsoft-com:"><D:set><D:prop>' +
  `<Z:Win32CreationTime>${OLD}</Z:Win32CreationTime><Z:Win32LastAccessTime>${OLD}</Z:Win32LastAccessTime>` +
  `<Z:Win32LastModifiedTime>${modified}</Z:Win32LastModifiedTime><Z:Win32FileAttributes>00000020</Z:Win32FileAttributes>` +
  '</D:prop></D:set></D:propertyupdate>';
const lockinfo =
  '<?xml version="1.0" encoding="utf-8" ?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/></D:lockscope>' +
  '<D:locktype><D:write/></D:locktype><D:owner><D:href>WIN-PC\\bob</D:href></D:owner></D:lockinfo>';
const win32Modified = (body: string) => /<Win32LastModifiedTime xmlns="urn:schemas-microsoft-com:">([^<]*)</.exec(body)?.[1];
const lastModified = (body: string) => /<D:getlastmodified>([^<]*)</.exec(body)?.[1];

describe('Win32 properties from Explorer', () => {
  it('a copy: PUT, LOCK, PROPPATCH with If (207, 200 for each), PUT, UNLOCK; the dates are the file mtime', async () => {
    const path = '/' + encodeURIComponent('Résumé #1 (final).docx');
    expect((await dav('PUT', path, { body: '', headers: { Translate: 'f' } })).status).toBe(201);
    const lock = await dav('LOCK', path, { headers: { Timeout: 'Second-3600' }, body: lockinfo });
    expect(lock.status).toBe(200);
    const token = String(lock.headers['lock-token']);
    const pp = await dav('PROPPATCH', path, { headers: { If: `(${token})` }, body: win32Set(OLD) });
    expect(pp.status).toBe(207);
    for (const n of ['Win32CreationTime', 'Win32LastAccessTime', 'Win32LastModifiedTime', 'Win32FileAttributes']) {
      expect(pp.body).toContain(`<${n} xmlns="urn:schemas-microsoft-com:"/>`);
    }
    expect(pp.body).toContain('HTTP/1.1 200 OK');
    expect(pp.body).not.toMatch(/HTTP\/1.1 (4|5)\d\d/);
    expect((await dav('PUT', path, { headers: { If: `(${token})` }, body: 'the document' })).status).toBe(204);
    // Explorer sets the dates again once the content is written.
    expect((await dav('PROPPATCH', path, { headers: { If: `(${token})` }, body: win32Set(OLD) })).status).toBe(207);
    expect((await dav('UNLOCK', path, { headers: { 'Lock-Token': token } })).status).toBe(204);

    // Windows' listing: PROPFIND with no body (allprop).
    const listed = await dav('PROPFIND', path, { headers: { Depth: '0', Translate: 'f' } });
    expect(listed.status).toBe(207);
    expect(lastModified(listed.body)).toBe(OLD); // the mtime went to the file
    expect(win32Modified(listed.body)).toBe(OLD);
  });

  it('after the file is rewritten, Win32LastModifiedTime follows the new mtime, in allprop and by name', async () => {
    expect((await dav('PUT', '/w.txt', { body: 'v1' })).status).toBe(201);
    expect((await dav('PROPPATCH', '/w.txt', { body: win32Set(OLD) })).status).toBe(207);
    // Rewritten later by another client (Finder, rclone, davfs2: a plain PUT).
    expect((await dav('PUT', '/w.txt', { body: 'version 2' })).status).toBe(204);

    const all = await dav('PROPFIND', '/w.txt', { headers: { Depth: '0' } });
    const now = lastModified(all.body)!;
    expect(now).not.toBe(OLD);
    expect(win32Modified(all.body)).toBe(now);
    const named = await dav('PROPFIND', '/w.txt', {
      headers: { Depth: '0' },
      body: '<D:propfind xmlns:D="DAV:" xmlns:Z="urn:schemas-microsoft-com:"><D:prop><Z:Win32LastModifiedTime/><Z:Win32CreationTime/></D:prop></D:propfind>',
    });
    expect(win32Modified(named.body)).toBe(now);
    expect(named.body).toContain(`<Win32CreationTime xmlns="urn:schemas-microsoft-com:">${OLD}</Win32CreationTime>`); // others as set
  });

  it('folders answer 207 with 200 for each Win32 property too', async () => {
    expect((await dav('MKCOL', '/copied%20folder')).status).toBe(201);
    const pp = await dav('PROPPATCH', '/copied%20folder', { body: win32Set(OLD) });
    expect(pp.status).toBe(207);
    expect(pp.body).toContain('<D:href>/dav/copied%20folder/</D:href>');
    expect(pp.body).not.toMatch(/HTTP\/1.1 (4|5)\d\d/);
  });
});
