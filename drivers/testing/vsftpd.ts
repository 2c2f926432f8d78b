/**
 * Test-only: a real vsftpd in the foreground on 127.0.0.1 with a temp config, passive ports on
 * loopback, and a throwaway local user `tgftp` (created once with no login shell and home `/`, as vsftpd enters the home before local_root; its password is
 * reset on every start). Authentication goes through a PAM service of our own (pam_unix only), so
 * the user needs no shell and is not subject to /etc/ftpusers. Stopped by PID in afterAll.
 */
import { execFile } from 'node:child_process';
import { chmod, chown, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { freePort, requireTool, startServer, type Server } from './process.js';

const run = promisify(execFile);
const USER = 'tgftp';
const PASSWORD = 'tg-ftp-test-password';
const PAM_SERVICE = 'treegate-ftp-test';

export interface Vsftpd {
  port: number;
  user: string;
  password: string;
  dataDir: string;
  server: Server;
  stop(): Promise<void>;
}

async function ensureUser(): Promise<{ uid: number; gid: number }> {
  try {
    await run('id', [USER]);
  } catch {
    await run('useradd', ['-M', '-d', '/', '-s', '/usr/sbin/nologin', USER]).catch(() => undefined); // a parallel run may win
  }
  const child = execFile('chpasswd');
  child.stdin!.end(`${USER}:${PASSWORD}\n`);
  await new Promise((r) => child.once('exit', r));
  const uid = Number((await run('id', ['-u', USER])).stdout.trim());
  const gid = Number((await run('id', ['-g', USER])).stdout.trim());
  return { uid, gid };
}

export async function startVsftpd(): Promise<Vsftpd> {
  await requireTool('/usr/sbin/vsftpd', 'vsftpd');
  const { uid, gid } = await ensureUser();
  await writeFile(`/etc/pam.d/${PAM_SERVICE}`, 'auth required pam_unix.so\naccount required pam_unix.so\nsession required pam_permit.so\n');
  await mkdir('/var/run/vsftpd/empty', { recursive: true });
  const dir = await mkdtemp(join(tmpdir(), 'tg-vsftpd-'));
  const dataDir = join(dir, 'data');
  await mkdir(dataDir);
  await chown(dataDir, uid, gid);
  await chmod(dir, 0o711); // the ftp user must traverse the (root-owned) temp folder
  const port = await freePort();
  const pasv = 20000 + Math.floor(Math.random() * 40000);
  const conf = [
    'listen=YES', 'listen_ipv6=NO', 'listen_address=127.0.0.1', `listen_port=${port}`, 'background=NO',
    'anonymous_enable=NO', 'local_enable=YES', 'write_enable=YES', 'local_umask=022', `local_root=${dataDir}`,
    'chroot_local_user=YES', 'allow_writeable_chroot=YES', `pam_service_name=${PAM_SERVICE}`, 'userlist_enable=NO',
    'pasv_enable=YES', `pasv_min_port=${pasv}`, `pasv_max_port=${pasv + 40}`, 'pasv_address=127.0.0.1',
    'seccomp_sandbox=NO', 'utf8_filesystem=YES', 'force_dot_files=YES', 'mdtm_write=YES', 'xferlog_enable=NO',
    `vsftpd_log_file=${join(dir, 'vsftpd.log')}`, 'max_clients=50', 'idle_session_timeout=120', 'data_connection_timeout=60',
  ].join('\n');
  await writeFile(join(dir, 'vsftpd.conf'), conf + '\n');
  const server = await startServer('/usr/sbin/vsftpd', [join(dir, 'vsftpd.conf')], port);
  return {
    port, user: USER, password: PASSWORD, dataDir, server,
    stop: async () => { await server.stop(); await rm(dir, { recursive: true, force: true }); },
  };
}
