/**
 * Make a file appear complete, and only if nothing is there yet: its content is written to a temp
 * file beside it, which link(2) then puts in place (EEXIST when the name is taken: the check and the
 * placing are one step). Used to claim DATA (owner.ts) and to create a first config file (config.ts).
 */
import { randomUUID } from 'node:crypto';
import { link, rm } from 'node:fs/promises';

/**
 * true when `file` was made, false when it already existed, 'no-links' when the file system has no
 * hard links (exFAT, some FUSE and SMB mounts): the caller then falls back to what it can. The temp
 * file is removed in every case, a failed `write` (a full disk) included: nothing else would.
 */
export async function linkNew(file: string, write: (tmp: string) => Promise<void>): Promise<boolean | 'no-links'> {
  const tmp = `${file}.${process.pid}.${randomUUID()}.tmp`;
  try {
    await write(tmp);
    await link(tmp, file);
    return true;
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'EEXIST') return false;
    if (code === 'EPERM' || code === 'ENOTSUP' || code === 'EOPNOTSUPP' || code === 'ENOSYS') return 'no-links';
    throw e;
  } finally {
    await rm(tmp, { force: true });
  }
}
