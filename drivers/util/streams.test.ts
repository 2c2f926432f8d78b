import { describe, expect, it } from 'vitest';
import { tempName, utf8Prefix } from './streams.js';

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

  it('utf8Prefix cuts by bytes at character boundaries', () => {
    expect(utf8Prefix('漢字', 5)).toBe('漢');
    expect(utf8Prefix('漢字', 6)).toBe('漢字');
    expect(utf8Prefix('a🎉b', 4)).toBe('a');
    expect(utf8Prefix('a🎉b', 5)).toBe('a🎉');
    expect(utf8Prefix('', 10)).toBe('');
  });
});
