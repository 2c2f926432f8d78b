/**
 * Client-emulation probe (Windows Mini-Redirector): `creationdate` must be RFC 3339 *without* a
 * fraction of a second. Windows 7 to 11 (Microsoft-WebDAV-MiniRedir) cannot parse
 * `2024-01-02T03:04:05.678Z`, though RFC 3339 allows it; treegate sent the milliseconds.
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
