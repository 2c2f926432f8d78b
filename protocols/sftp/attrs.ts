/**
 * Entry → SFTP ATTRS and `ls -l` style longnames. The VFS has no owners or modes, so files show
 * 0644 and folders 0755 (what clients need to tell them apart); owner/group are the session's user.
 */
import type { Attributes, FileEntry } from 'ssh2';
import type { Entry } from '../../src/vfs/types.js';

const S_IFDIR = 0o040000;
const S_IFREG = 0o100000;

/**
 * SFTP v3 carries times as uint32 seconds (1970 to 2106-02-07). A time outside is clamped to the
 * nearest end: ssh2 writes only the low 32 bits, so a file of 1969 showed as 2106 and one of 2200
 * as 2063 (`get -p` copied those dates), while its longname showed the true date.
 */
const UINT32_MAX = 2 ** 32 - 1;
const sftpSeconds = (d: Date) => Math.min(UINT32_MAX, Math.max(0, Math.floor(d.getTime() / 1000) || 0));

export function attrsOf(e: Pick<Entry, 'isDir' | 'size' | 'modified'>): Attributes {
  const mtime = sftpSeconds(e.modified);
  return {
    mode: e.isDir ? S_IFDIR | 0o755 : S_IFREG | 0o644,
    uid: 0,
    gid: 0,
    size: e.isDir ? 0 : e.size,
    atime: mtime,
    mtime,
  };
}

const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];
const SIX_MONTHS_MS = 182 * 24 * 3600 * 1000;

/**
 * `ls -l` date column: "Mon dd HH:MM" within the last six months, else "Mon dd  yyyy" (what FileZilla
 * parses). A future date shows its year, as OpenSSH's ls_file does: clients take a yearless date as
 * the latest past one, so a file dated next month showed as eleven months old.
 */
function lsDate(d: Date, now: number): string {
  const mon = MONTHS[d.getUTCMonth()];
  const day = String(d.getUTCDate()).padStart(2, ' ');
  const age = now - d.getTime();
  if (age >= 0 && age < SIX_MONTHS_MS) {
    const hh = String(d.getUTCHours()).padStart(2, '0');
    const mm = String(d.getUTCMinutes()).padStart(2, '0');
    return `${mon} ${day} ${hh}:${mm}`;
  }
  return `${mon} ${day}  ${d.getUTCFullYear()}`;
}

/**
 * OpenSSH's format: "%s %3u %-8.8s %-8.8s %8llu %s %s". Clients (FileZilla, lftp) split it on
 * white space, so a user name with a space would make two columns: it is shown with `_` instead.
 */
export function longnameOf(e: Pick<Entry, 'isDir' | 'size' | 'modified' | 'name'>, owner: string, now = Date.now()): string {
  const perm = e.isDir ? 'drwxr-xr-x' : '-rw-r--r--';
  const o = owner.replace(/\s/g, '_').slice(0, 8).padEnd(8, ' ');
  const size = String(e.isDir ? 0 : e.size).padStart(8, ' ');
  return `${perm}   1 ${o} ${o} ${size} ${lsDate(e.modified, now)} ${e.name}`;
}

export function fileEntryOf(e: Entry, owner: string, now: number): FileEntry {
  return { filename: e.name, longname: longnameOf(e, owner, now), attrs: attrsOf(e) };
}
