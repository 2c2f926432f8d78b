import { closeSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import { randomUUID } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { nameUnnamed, openUnnamed } from './unnamed-file.js';

let dir: string;
beforeEach(() => void (dir = mkdtempSync(join(tmpdir(), 'tg-unnamed-'))));
afterEach(() => rmSync(dir, { recursive: true, force: true }));

/** An unnamed file in `dir` holding `text` (the addon is built on Linux by npm run build). */
function unnamed(text: string): number {
  const fd = openUnnamed(dir);
  if (fd === undefined) throw new Error('no unnamed file: native/linkfd not built, or no O_TMPFILE here');
  writeSync(fd, text);
  return fd;
}
const temp = () => join(dir, `.tg-temp-${randomUUID()}`);

describe('unnamed upload files (O_TMPFILE + linkat)', () => {
  it('are available on Linux, and show in the folder only once named', () => {
    expect(openUnnamed(dir) !== undefined).toBe(process.platform === 'linux');
    if (process.platform !== 'linux') return;
    const fd = unnamed('new');
    expect(readdirSync(dir)).toEqual([]);
    nameUnnamed(fd, join(dir, 'f.txt'), false, temp);
    closeSync(fd);
    expect(readdirSync(dir)).toEqual(['f.txt']);
    expect(readFileSync(join(dir, 'f.txt'), 'utf8')).toBe('new');
  });

  it('leave nothing when never named (the upload failed, or the process died)', () => {
    if (process.platform !== 'linux') return;
    closeSync(unnamed('lost'));
    expect(readdirSync(dir)).toEqual([]);
  });

  it('replace an existing file through a temp name, leaving only the new content', () => {
    if (process.platform !== 'linux') return;
    writeFileSync(join(dir, 'f.txt'), 'old');
    const fd = unnamed('new');
    nameUnnamed(fd, join(dir, 'f.txt'), false, temp);
    closeSync(fd);
    expect(readdirSync(dir)).toEqual(['f.txt']);
    expect(readFileSync(join(dir, 'f.txt'), 'utf8')).toBe('new');
  });

  it('with noReplace fail with EEXIST on a taken name and leave it as it was', () => {
    if (process.platform !== 'linux') return;
    writeFileSync(join(dir, 'f.txt'), 'old');
    const fd = unnamed('new');
    expect(() => nameUnnamed(fd, join(dir, 'f.txt'), true, temp)).toThrow(expect.objectContaining({ code: 'EEXIST' }));
    closeSync(fd);
    expect(readdirSync(dir)).toEqual(['f.txt']);
    expect(readFileSync(join(dir, 'f.txt'), 'utf8')).toBe('old');
  });

  it('over a folder fail as a rename would, and leave no temp name behind', () => {
    if (process.platform !== 'linux') return;
    mkdirSync(join(dir, 'sub'));
    const fd = unnamed('new');
    expect(() => nameUnnamed(fd, join(dir, 'sub'), false, temp)).toThrow(expect.objectContaining({ code: 'EISDIR' }));
    closeSync(fd);
    expect(readdirSync(dir)).toEqual(['sub']);
  });

  it('in a folder that is gone fail with ENOENT', () => {
    if (process.platform !== 'linux') return;
    const fd = unnamed('new');
    expect(() => nameUnnamed(fd, join(dir, 'nope', 'f.txt'), false, temp)).toThrow(expect.objectContaining({ code: 'ENOENT' }));
    closeSync(fd);
    expect(readdirSync(dir)).toEqual([]);
  });
});
