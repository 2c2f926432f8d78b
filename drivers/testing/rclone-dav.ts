/**
 * Test-only: `rclone serve webdav` on 127.0.0.1 over a temp folder, with one user. Stopped by PID.
 */
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, requireTool, startServer, type DavServer } from './process.js';

export type RcloneDav = DavServer;

export async function startRcloneDav(): Promise<RcloneDav> {
  await requireTool('/usr/bin/rclone', 'rclone');
  const dir = await mkdtemp(join(tmpdir(), 'tg-rclone-'));
  const dataDir = join(dir, 'data');
  await mkdir(dataDir);
  const port = await freePort();
  const user = 'dav';
  const password = 'rclone-secret';
  const server = await startServer('/usr/bin/rclone', [
    'serve', 'webdav', dataDir, '--addr', `127.0.0.1:${port}`, '--user', user, '--pass', password, '--config', join(dir, 'rclone.conf'),
  ], port);
  return {
    port, url: `http://127.0.0.1:${port}`, user, password, dataDir, server,
    stop: async () => { await server.stop(); await rm(dir, { recursive: true, force: true }); },
  };
}
