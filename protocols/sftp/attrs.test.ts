import { describe, expect, it } from 'vitest';
import { attrsOf, longnameOf } from './attrs.js';

describe('attrs', () => {
  const now = Date.UTC(2025, 5, 15, 12, 0);
  it('formats longnames like OpenSSH `ls -l` (recent: time, older: year)', () => {
    expect(longnameOf({ name: 'a.txt', isDir: false, size: 1234, modified: new Date(Date.UTC(2025, 4, 3, 9, 5)) }, 'admin', now)).toBe(
      '-rw-r--r--   1 admin    admin        1234 May  3 09:05 a.txt',
    );
    expect(longnameOf({ name: 'docs', isDir: true, size: 4096, modified: new Date(Date.UTC(2020, 11, 24)) }, 'averylongname', now)).toBe(
      'drwxr-xr-x   1 averylon averylon        0 Dec 24  2020 docs',
    );
  });

  it('keeps the owner one column when the user name has white space (clients split on it)', () => {
    const line = longnameOf({ name: 'my file.txt', isDir: false, size: 5, modified: new Date(Date.UTC(2025, 4, 3, 9, 5)) }, 'jo doe\t2', now);
    expect(line).toBe('-rw-r--r--   1 jo_doe_2 jo_doe_2        5 May  3 09:05 my file.txt');
    expect(line.split(/\s+/).slice(0, 8)).toEqual(['-rw-r--r--', '1', 'jo_doe_2', 'jo_doe_2', '5', 'May', '3', '09:05']);
  });

  it('sets the file type bits clients use to tell folders from files', () => {
    expect(attrsOf({ isDir: true, size: 9, modified: new Date(1000) })).toMatchObject({ mode: 0o40755, size: 0, mtime: 1 });
    expect(attrsOf({ isDir: false, size: 9, modified: new Date(1000) })).toMatchObject({ mode: 0o100644, size: 9 });
  });
});
