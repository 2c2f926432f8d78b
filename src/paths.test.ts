import { describe, expect, it } from 'vitest';
import { basename, encodePathForUrl, isWithin, join, normalize, parent, relativeTo, validateName } from './paths.js';

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
});
