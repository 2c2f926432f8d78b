import { describe, expect, it } from 'vitest';
import { basename, encodePathForUrl, isRootPath, isWithin, join, normalize, parent, relativeTo, segments, validateName } from './paths.js';

describe('paths', () => {
  it('normalises client paths', () => {
    expect(normalize('')).toBe('/');
    expect(normalize('a//b/./c/')).toBe('/a/b/c');
    expect(normalize('/')).toBe('/');
  });
  it('refuses escapes instead of resolving them', () => {
    for (const bad of ['..', '/a/../b', 'a/..', '/a\\b', '/a\0b', '../../etc/passwd']) {
      expect(() => normalize(bad), bad).toThrow('access using relative path is not allowed');
    }
  });
  it('validates single names', () => {
    expect(validateName('a b.txt')).toBe('a b.txt');
    for (const bad of ['', '.', '..', 'a/b', 'a\\b', 'a\0']) expect(() => validateName(bad)).toThrow();
  });
  it('compares on whole segments', () => {
    expect(isWithin('/a', '/a/b')).toBe(true);
    expect(isWithin('/a', '/a')).toBe(true);
    expect(isWithin('/a', '/ab')).toBe(false);
    expect(isWithin('/', '/x')).toBe(true);
    expect(relativeTo('/a', '/a/b/c')).toBe('/b/c');
    expect(relativeTo('/a', '/a')).toBe('/');
    expect(relativeTo('/a', '/ab')).toBeUndefined();
  });
  it('joins, splits and encodes', () => {
    expect(join('/a', 'b/c', 'd')).toBe('/a/b/c/d');
    expect(parent('/a/b')).toBe('/a');
    expect(parent('/a')).toBe('/');
    expect(basename('/a/b c')).toBe('b c');
    expect(encodePathForUrl('/a b/#%')).toBe('/a%20b/%23%25');
  });
  it('gives a clean path the same answers as its unclean spellings', () => {
    // Clean paths take a slicing shortcut; the unclean spellings of the same path take the
    // split-and-check route. Both must agree, also on names that merely look like dots.
    const clean = ['/', '/a', '/ab', '/a/b c', '/.hidden/..x/...', '/ü/日本/x.txt', '/a/b/c/d'];
    const spellings = (p: string) => [p + '/', '/.' + p, '/' + p, p.replace(/\//g, '//'), p.slice(1)];
    for (const p of clean) {
      for (const q of spellings(p)) {
        expect(normalize(q), q).toBe(p);
        expect(segments(q), q).toEqual(segments(p));
        expect(parent(q), q).toBe(parent(p));
        expect(basename(q), q).toBe(basename(p));
        expect(isRootPath(q), q).toBe(p === '/');
        for (const a of clean) {
          expect(isWithin(a, q), `${a} ${q}`).toBe(isWithin(a, p));
          expect(relativeTo(a, q), `${a} ${q}`).toBe(relativeTo(a, p));
          expect(join(a, q), `${a} ${q}`).toBe(join(a + '/', q));
        }
      }
    }
    expect(segments('/.hidden/..x/...')).toEqual(['.hidden', '..x', '...']);
    expect(parent('/')).toBe('/');
    expect(basename('/')).toBe('');
    expect(isWithin('/a/b', '/a')).toBe(false);
    expect(relativeTo('/a/b', '/a')).toBeUndefined();
  });
  it('joins a user path under a base path, refusing escapes', () => {
    expect(join('/', '/a/b')).toBe('/a/b');
    expect(join('/base', '/')).toBe('/base');
    expect(join('/base', '/x/y')).toBe('/base/x/y');
    expect(join('/base', 'x/y/')).toBe('/base/x/y');
    for (const bad of ['/../etc', '/x/..', '..', '/a\\b', '/a\0b']) expect(() => join('/base', bad), bad).toThrow('relative path');
  });
});
