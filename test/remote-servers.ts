/**
 * Helpers for the remote driver tests (not a test file itself): the real server each remote driver
 * talks to on loopback (s3rver, sshd, nginx dav, vsftpd), the storage `addition` that aims a driver
 * at its server or at a proxy in front of it, and the storage-create call over REST.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { TestServer } from './harness.js';
import { INSTANCE_HEADER } from '../drivers/types.js';
import { startS3rver, type S3rver } from '../drivers/testing/s3rver.js';
import { startSshd, type Sshd } from '../drivers/testing/sshd.js';
import { startNginxDav, type NginxDav } from '../drivers/testing/nginx-dav.js';
import { startVsftpd, type Vsftpd } from '../drivers/testing/vsftpd.js';

export const REMOTE_DRIVERS = ['S3', 'SFTP', 'WebDav', 'FTP'] as const;
export type RemoteDriver = (typeof REMOTE_DRIVERS)[number];

/** The server each driver talks to, and the name it goes by in `RemoteServers`. */
interface ServerOf { S3: S3rver; SFTP: Sshd; WebDav: NginxDav; FTP: Vsftpd }
const FIELD = { S3: 's3', SFTP: 'sshd', WebDav: 'dav', FTP: 'ftpd' } as const;
const START: { [D in RemoteDriver]: () => Promise<ServerOf[D]> } = { S3: startS3rver, SFTP: startSshd, WebDav: startNginxDav, FTP: startVsftpd };

type Addition = Record<string, unknown>;

/** The `addition` of each driver's storage on `server`, aimed at `port` (the server's own, or a proxy's). */
export const additionFor: { [D in RemoteDriver]: (server: ServerOf[D], port?: number) => Addition } = {
  S3: (s3, port = s3.port) => ({
    bucket: s3.bucket, endpoint: `http://127.0.0.1:${port}`, region: 'us-east-1', access_key_id: s3.accessKeyId,
    secret_access_key: s3.secretAccessKey, force_path_style: true, root_folder_path: '/',
  }),
  SFTP: (sshd, port = sshd.port) => ({ address: `127.0.0.1:${port}`, username: sshd.user, private_key: sshd.privateKey, root_folder_path: sshd.dataDir }),
  WebDav: (dav, port = dav.port) => ({ address: `http://127.0.0.1:${port}`, username: dav.user, password: dav.password, root_folder_path: '/' }),
  FTP: (ftpd, port = ftpd.port) => ({ address: `127.0.0.1:${port}`, encoding: 'UTF-8', username: ftpd.user, password: ftpd.password, root_folder_path: '/' }),
};

/** The servers of drivers `D` (as `s3`, `sshd`, `dav`, `ftpd`), with their ports and storage additions. */
export type RemoteServers<D extends RemoteDriver = RemoteDriver> = { readonly [K in D as (typeof FIELD)[K]]: ServerOf[K] } & {
  portOf(driver: D): number;
  /** `additionFor[driver]` on this driver's server, aimed at `port` (default: the server's own). */
  additionOf(driver: D, port?: number): Addition;
  /** Stop every server, whatever fails. */
  stop(): Promise<void>;
};

/** Start the servers of `drivers` side by side. */
export async function startRemoteServers<D extends RemoteDriver>(drivers: readonly D[]): Promise<RemoteServers<D>> {
  const servers = await Promise.all(drivers.map((d) => START[d]()));
  const of = (d: D): ServerOf[RemoteDriver] => servers[drivers.indexOf(d)]!;
  const named = Object.fromEntries(drivers.map((d, i) => [FIELD[d], servers[i]]));
  return {
    ...named,
    portOf: (d: D) => of(d).port,
    additionOf: (d: D, port?: number) => (additionFor[d] as (server: ServerOf[RemoteDriver], port?: number) => Addition)(of(d), port),
    stop: async () => { await Promise.allSettled(servers.map((s) => s.stop())); },
  } as RemoteServers<D>;
}

/** Create a storage with no cache over REST; `extra` adds request fields (e.g. webdav_policy). */
export function createStorage(ts: Pick<TestServer, 'api'>, admin: string, mount_path: string, driver: string, addition: Addition, extra: Record<string, unknown> = {}) {
  return ts.api<{ id: number }>('/api/admin/storage/create', {
    token: admin, body: { mount_path, driver, addition: JSON.stringify(addition), cache_expiration: 0, ...extra },
  });
}

/**
 * A proxy to this server's /dav that sends the first `head` bytes of each GET body, then holds the
 * rest until release(): a copy task reading through it is mid-transfer for as long as the test likes.
 * connections(): the client connections open now (a WebDav storage's, through it).
 */
export async function holdingProxy(target: string, head: number) {
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  let sent = 0;
  let open = 0;
  const server = http.createServer((req, res) => {
    // Without the loop guard's header this server's /dav stands in for another one.
    const headers = { ...req.headers };
    delete headers[INSTANCE_HEADER];
    const up = http.request(`${target}${req.url ?? '/'}`, { method: req.method, headers }, (ur) => {
      res.writeHead(ur.statusCode ?? 502, ur.headers);
      if (req.method !== 'GET') return void ur.pipe(res);
      ur.pause();
      const parts: Buffer[] = [];
      ur.on('data', (c: Buffer) => parts.push(c));
      ur.on('end', () => {
        const all = Buffer.concat(parts);
        sent += Math.min(head, all.length);
        res.write(all.subarray(0, head));
        void gate.then(() => res.end(all.subarray(head)));
      });
      ur.resume();
    });
    up.once('error', () => res.destroy());
    req.pipe(up);
  });
  server.on('connection', (socket) => {
    open++;
    socket.once('close', () => open--);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const port = (server.address() as AddressInfo).port;
  return {
    port, release, sent: () => sent, connections: () => open,
    close: () => new Promise<void>((r) => { release(); server.closeAllConnections(); server.close(() => r()); }),
  };
}
