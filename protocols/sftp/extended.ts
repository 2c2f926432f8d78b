/**
 * EXTENDED requests (OpenSSH's extensions). What we advertise in VERSION is what we implement:
 * posix-rename (rename that replaces), statvfs/fstatvfs (vfs.usage), limits (255 KiB reads and
 * writes). hardlink and anything else answer OP_UNSUPPORTED.
 */
import type { SFTPWrapper } from 'ssh2';
import { VfsError } from '../../src/errors.js';
import { limitsReply, sendExtendedReply, supported, u64 } from './openssh-ext.js';

export const ADVERTISED: Record<string, string> = {
  'posix-rename@openssh.com': '1',
  'statvfs@openssh.com': '2',
  'fstatvfs@openssh.com': '2',
  'limits@openssh.com': '1',
};

/** Reads SSH `string` fields out of an extension's request data. */
export function readStrings(data: Buffer | undefined, count: number): { strings: string[]; raw: Buffer[] } {
  const strings: string[] = [];
  const raw: Buffer[] = [];
  let p = 0;
  for (let i = 0; i < count; i++) {
    if (!data || p + 4 > data.length) throw new VfsError('INVALID', 'malformed extended request');
    const len = data.readUInt32BE(p);
    if (p + 4 + len > data.length) throw new VfsError('INVALID', 'malformed extended request');
    const b = data.subarray(p + 4, p + 4 + len);
    raw.push(b);
    strings.push(b.toString('utf8'));
    p += 4 + len;
  }
  return { strings, raw };
}

const BLOCK = 4096;

/**
 * statvfs@openssh.com reply body: 11 uint64 (bsize, frsize, blocks, bfree, bavail, files, ffree, favail, fsid, flag, namemax).
 * `free` is what the user may still write (bavail); bfree is total - used, which also counts blocks
 * reserved for root: clients take used = blocks - bfree (rclone about, sftp's df), so bfree = bavail
 * would report the reserved space as used (on a 5%-reserved ext4 disk, 5% of it).
 */
export function statvfsReply(u: { total?: number; free?: number; used?: number }): Buffer[] {
  const total = u.total ?? (u.used !== undefined && u.free !== undefined ? u.used + u.free : 0);
  const free = u.free ?? (u.used !== undefined && total ? Math.max(0, total - u.used) : 0);
  const unused = u.used !== undefined && total ? Math.max(0, total - u.used) : free;
  const blocks = Math.ceil(total / BLOCK);
  const bavail = Math.floor(free / BLOCK);
  const bfree = Math.max(bavail, Math.floor(unused / BLOCK));
  return [u64(BLOCK), u64(BLOCK), u64(blocks), u64(bfree), u64(bavail), u64(0), u64(0), u64(0), u64(0), u64(0), u64(255)];
}

export interface ExtendedOps {
  rename(from: string, to: string): Promise<void>;
  usage(path: string): Promise<{ total?: number; free?: number; used?: number }>;
  handlePath(handle: Buffer): string;
  maxHandles: number;
}

/** Handle one EXTENDED request; resolves once answered (throws a VfsError to answer a status). */
export async function handleExtended(sftp: SFTPWrapper, reqId: number, name: string, data: Buffer | undefined, ops: ExtendedOps): Promise<'ok' | 'replied'> {
  const canReply = supported(sftp);
  switch (name) {
    case 'posix-rename@openssh.com': {
      const [from, to] = readStrings(data, 2).strings;
      await ops.rename(from!, to!);
      return 'ok';
    }
    case 'statvfs@openssh.com':
    case 'fstatvfs@openssh.com': {
      if (!canReply) break;
      const { strings, raw } = readStrings(data, 1);
      const path = name === 'statvfs@openssh.com' ? strings[0]! : ops.handlePath(raw[0]!);
      sendExtendedReply(sftp, reqId, statvfsReply(await ops.usage(path)));
      return 'replied';
    }
    case 'limits@openssh.com':
      if (!canReply) break;
      sendExtendedReply(sftp, reqId, limitsReply(ops.maxHandles));
      return 'replied';
  }
  throw new VfsError('NOT_SUPPORTED', `${name} is not supported`);
}
