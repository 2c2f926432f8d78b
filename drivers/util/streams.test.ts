import { getEventListeners } from 'node:events';
import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { destroyOnAbort, isTempName, tempName, utf8Prefix } from './streams.js';

describe('destroyOnAbort', () => {
  it('lets go of the signal when the stream closes, so a long-lived signal keeps no stream alive', async () => {
    const ac = new AbortController(); // an SFTP channel's: it serves every download of the session
    for (let i = 0; i < 20; i++) {
      const s = new PassThrough();
      destroyOnAbort(s, ac.signal);
      const closed = new Promise((r) => s.once('close', r));
      s.end('x');
      s.resume();
      await closed;
    }
    expect(getEventListeners(ac.signal, 'abort')).toHaveLength(0);
    const live = new PassThrough();
    const failed = new Promise((r) => live.once('error', r));
    destroyOnAbort(live, ac.signal);
    ac.abort();
    expect(await failed).toMatchObject({ code: 'UPSTREAM' }); // still does its job for streams that are open
  });
});

describe('tempName', () => {
  it('stays within 255 UTF-8 bytes for long names in any script, and stays valid UTF-8', () => {
    for (const name of ['漢'.repeat(80) + '.txt', '🎉'.repeat(63) + '.txt', 'a'.repeat(255), 'é'.repeat(127)]) {
      const t = tempName(name);
      expect(Buffer.byteLength(t)).toBeLessThanOrEqual(255);
      expect(Buffer.from(t).toString()).toBe(t); // no character (or surrogate pair) was cut in half
      expect(t).toMatch(/^\..*\.tg-[0-9a-z]+\.tmp$/);
    }
    expect(tempName('short.txt')).toMatch(/^\.short\.txt\.tg-[0-9a-z]+\.tmp$/);
  });

  it('isTempName knows every name tempName makes, and no ordinary name', () => {
    for (const name of ['a.txt', '漢'.repeat(80), '.hidden', 'x\ny']) expect(isTempName(tempName(name))).toBe(true);
    for (const name of ['a.txt', '.hidden', 'a.tg-1234.tmp', '.a.tg-.tmp', '.a.tg-UPPER.tmp', '.a.tg-123456789.tmp']) expect(isTempName(name)).toBe(false);
  });

  it('utf8Prefix cuts by bytes at character boundaries', () => {
    expect(utf8Prefix('漢字', 5)).toBe('漢');
    expect(utf8Prefix('漢字', 6)).toBe('漢字');
    expect(utf8Prefix('a🎉b', 4)).toBe('a');
    expect(utf8Prefix('a🎉b', 5)).toBe('a🎉');
    expect(utf8Prefix('', 10)).toBe('');
  });
});
