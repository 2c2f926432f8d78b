/**
 * Test-only: nginx with its dav and dav_ext modules in the foreground on 127.0.0.1, with a temp
 * config, a `{SHA}` htpasswd and every temp path inside a temp folder. Stopped by PID in afterAll.
 */
import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, requireTool, startServer, type DavServer } from './process.js';

export type NginxDav = DavServer;

export async function startNginxDav(): Promise<NginxDav> {
  await requireTool('/usr/sbin/nginx', 'nginx libnginx-mod-http-dav-ext');
  const dir = await mkdtemp(join(tmpdir(), 'tg-nginx-'));
  const dataDir = join(dir, 'data');
  await mkdir(dataDir);
  await mkdir(join(dir, 'tmp'));
  const port = await freePort();
  const user = 'dav';
  const password = 'dav-secret';
  await writeFile(join(dir, 'htpasswd'), `${user}:{SHA}${createHash('sha1').update(password).digest('base64')}\n`);
  const t = (n: string) => join(dir, 'tmp', n);
  const conf = `
load_module /usr/lib/nginx/modules/ngx_http_dav_ext_module.so;
user root;
daemon off;
worker_processes 1;
pid ${join(dir, 'nginx.pid')};
error_log ${join(dir, 'error.log')} warn;
events { worker_connections 128; }
http {
  access_log off;
  client_body_temp_path ${t('body')};
  proxy_temp_path ${t('proxy')};
  fastcgi_temp_path ${t('fastcgi')};
  uwsgi_temp_path ${t('uwsgi')};
  scgi_temp_path ${t('scgi')};
  server {
    listen 127.0.0.1:${port};
    root ${dataDir};
    client_max_body_size 0;
    location / {
      auth_basic "dav";
      auth_basic_user_file ${join(dir, 'htpasswd')};
      dav_methods PUT DELETE MKCOL COPY MOVE;
      dav_ext_methods PROPFIND OPTIONS;
      create_full_put_path on;
      dav_access user:rw group:rw all:r;
    }
  }
}
`;
  await writeFile(join(dir, 'nginx.conf'), conf);
  const server = await startServer('/usr/sbin/nginx', ['-e', join(dir, 'error.log'), '-p', dir, '-c', join(dir, 'nginx.conf')], port);
  return {
    port, url: `http://127.0.0.1:${port}`, user, password, dataDir, server,
    stop: async () => { await server.stop(); await rm(dir, { recursive: true, force: true }); },
  };
}
