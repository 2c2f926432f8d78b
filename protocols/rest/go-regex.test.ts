import { describe, expect, it } from 'vitest';
import { compileGoRegex, expandGo, replaceAllGo } from './go-regex.js';

describe('Go regexp replacement', () => {
  it('expands $n, ${n}, ${name}, $$ and treats $1x as the group named 1x', () => {
    const g = ['IMG_01.jpg', 'IMG', '01'];
    expect(expandGo('$1-${2}-$$-$1x-${x}', g, { x: 'X' })).toBe('IMG-01-$--X');
    expect(expandGo('cost $ and ${ and ${}', g, undefined)).toBe('cost $ and ${ and ${}');
    expect(expandGo('$9', g, undefined)).toBe('');
  });

  it('replaces every match like ReplaceAllString', () => {
    expect(replaceAllGo(compileGoRegex('a(\\d)'), 'a1-a2', '<$1>')).toBe('<1>-<2>');
    expect(replaceAllGo(compileGoRegex('(?P<n>\\d+)'), 'x12y3', '#${n}')).toBe('x#12y#3');
    expect(replaceAllGo(compileGoRegex('(?i)abc'), 'ABC', 'z')).toBe('z');
  });

  it('reports compile errors like Go', () => {
    expect(() => compileGoRegex('([a-')).toThrow(/^error parsing regexp: /);
  });
});
