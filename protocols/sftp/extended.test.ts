import type { SFTPWrapper } from 'ssh2';
import { describe, expect, it } from 'vitest';
import { handleExtended, readStrings, statvfsReply, type ExtendedOps } from './extended.js';

const str = (s: string) => {
  const b = Buffer.from(s);
  const l = Buffer.alloc(4);
  l.writeUInt32BE(b.length);
  return Buffer.concat([l, b]);
};

describe('extended requests', () => {
  it('parses SSH strings and refuses truncated data', () => {
    expect(readStrings(Buffer.concat([str('/a'), str('/b')]), 2).strings).toEqual(['/a', '/b']);
    expect(() => readStrings(str('/a').subarray(0, 4), 1)).toThrow(/malformed/);
  });

  it('statvfs reports 4 KiB blocks from vfs.usage', () => {
    const body = Buffer.concat(statvfsReply({ total: 8192 * 4096, free: 1024 * 4096 }));
    expect(body.length).toBe(11 * 8);
    expect(body.readBigUInt64BE(16)).toBe(8192n); // f_blocks
    expect(body.readBigUInt64BE(24)).toBe(1024n); // f_bfree
  });

  it('posix-rename replaces through the VFS; hardlink and unknown names are OP_UNSUPPORTED', async () => {
    const calls: string[][] = [];
    const ops: ExtendedOps = { rename: async (a, b) => void calls.push([a, b]), usage: async () => ({}), handlePath: () => '/', maxHandles: 1 };
    const sftp = {} as SFTPWrapper;
    expect(await handleExtended(sftp, 1, 'posix-rename@openssh.com', Buffer.concat([str('/x'), str('/y')]), ops)).toBe('ok');
    expect(calls).toEqual([['/x', '/y']]);
    await expect(handleExtended(sftp, 2, 'hardlink@openssh.com', Buffer.concat([str('/x'), str('/z')]), ops)).rejects.toMatchObject({ code: 'NOT_SUPPORTED' });
    await expect(handleExtended(sftp, 3, 'copy-data', undefined, ops)).rejects.toMatchObject({ code: 'NOT_SUPPORTED' });
  });
});
