import { FTPError } from 'basic-ftp';
import { describe, expect, it } from 'vitest';
import { ftpError } from './session.js';

const reply = (code: number, message: string) => new FTPError({ code, message: `${code} ${message}` });

describe('ftpError', () => {
  it.each([
    [550, 'No such file or directory', 'NOT_FOUND'],
    [553, 'Could not create file', 'INVALID'],
    [452, 'Insufficient storage space in system', 'NO_SPACE'], // RFC 959's two storage-full replies
    [552, 'Exceeded storage allocation', 'NO_SPACE'],
    [451, 'Failure writing to local file', 'UPSTREAM'],
  ])('maps reply %i (%s) to %s', (code, message, vfsCode) => {
    expect(ftpError(reply(code, message), '/x')).toMatchObject({ code: vfsCode, path: '/x' });
  });
});
