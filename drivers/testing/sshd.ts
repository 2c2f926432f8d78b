/**
 * Test-only: a real OpenSSH sshd in the foreground on 127.0.0.1, with a throwaway host key and a
 * throwaway user key for the current user, SFTP via internal-sftp. Stopped by PID in afterAll.
 */
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { freePort, requireTool, startServer, type Server } from './process.js';

const run = promisify(execFile);

export interface Sshd {
  port: number;
  user: string;
  /** OpenSSH-format private key allowed to log in. */
  privateKey: string;
  /** A folder the tests may use as root_folder_path. */
  dataDir: string;
  server: Server;
  stop(): Promise<void>;
}

/** `sftpFlags`: options of internal-sftp (e.g. `-P fsetstat` to refuse a request, as some servers do). */
export async function startSshd(opts: { sftpFlags?: string } = {}): Promise<Sshd> {
  await requireTool('/usr/sbin/sshd', 'openssh-server');
  await requireTool('/usr/bin/ssh-keygen', 'openssh-client');
  const dir = await mkdtemp(join(tmpdir(), 'tg-sshd-'));
  const dataDir = join(dir, 'data');
  await mkdir(dataDir);
  await mkdir('/run/sshd', { recursive: true });
  await run('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', join(dir, 'host_key')]);
  await run('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', join(dir, 'user_key')]);
  await writeFile(join(dir, 'authorized_keys'), await readFile(join(dir, 'user_key.pub')));
  const port = await freePort();
  const cfg = [
    `Port ${port}`, 'ListenAddress 127.0.0.1', `HostKey ${join(dir, 'host_key')}`, 'PidFile none',
    `AuthorizedKeysFile ${join(dir, 'authorized_keys')}`, 'StrictModes no', 'UsePAM no',
    'PermitRootLogin prohibit-password', 'PasswordAuthentication yes', 'KbdInteractiveAuthentication no',
    `Subsystem sftp internal-sftp ${opts.sftpFlags ?? ''}`.trim(), 'LogLevel ERROR', 'LoginGraceTime 20', 'MaxStartups 50',
  ].join('\n');
  await writeFile(join(dir, 'sshd_config'), cfg + '\n');
  const server = await startServer('/usr/sbin/sshd', ['-D', '-e', '-f', join(dir, 'sshd_config')], port);
  return {
    port, user: userInfo().username, privateKey: await readFile(join(dir, 'user_key'), 'utf8'), dataDir, server,
    stop: async () => { await server.stop(); await rm(dir, { recursive: true, force: true }); },
  };
}
