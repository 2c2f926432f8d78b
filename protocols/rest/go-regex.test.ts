import { describe, expect, it } from 'vitest';
import { expandGo, GoRegex } from './go-regex.js';

const compileGoRegex = (pattern: string) => GoRegex.compile(pattern);
const goReplace = (pattern: string, input: string, template: string) => GoRegex.compile(pattern).replaceAll(input, template);

describe('Go regexp replacement', () => {
  it('expands $n, ${n}, ${name}, $$ and treats $1x as the group named 1x', () => {
    const g = ['IMG_01.jpg', 'IMG', '01'];
    expect(expandGo('$1-${2}-$$-$1x-${x}', g, { x: 'X' })).toBe('IMG-01-$--X');
    expect(expandGo('cost $ and ${ and ${}', g, undefined)).toBe('cost $ and ${ and ${}');
    expect(expandGo('$9', g, undefined)).toBe('');
  });

  it('replaces every match like ReplaceAllString', () => {
    expect(goReplace('a(\\d)', 'a1-a2', '<$1>')).toBe('<1>-<2>');
    expect(goReplace('(?P<n>\\d+)', 'x12y3', '#${n}')).toBe('x#12y#3');
    expect(goReplace('(?i)abc', 'ABC', 'z')).toBe('z');
  });

  it('reports compile errors like Go', () => {
    expect(() => compileGoRegex('([a-')).toThrow(/^error parsing regexp: /);
  });

  it('expands names like Go: Unicode letters and digits, $01 is the group named "01", $1é the group named "1é"', () => {
    const g = ['ab', 'a'];
    expect(expandGo('$01|${01}|$1|$1é|${名}|$名.', g, {})).toBe('||a|||.');
    expect(expandGo('$01', g, { '01': 'Z' })).toBe('Z');
    expect(expandGo('${1', g, undefined)).toBe('${1');
  });

  it('matches in linear time: ^(a+)+$ on 40 × a + ! (hours for a backtracking RegExp)', () => {
    const re = compileGoRegex('^(a+)+$');
    const name = `${'a'.repeat(40)}!`;
    expect(re.test(name)).toBe(false);
    expect(re.replaceAll(name, 'b')).toBe(name);
    expect(re.replaceAll('a'.repeat(40), 'b')).toBe('b');
    expect(goReplace('(x+x+)+y', 'x'.repeat(40), '-')).toBe('x'.repeat(40));
  });

  it('ignores an empty match abutting the previous match, like ReplaceAllString', () => {
    expect(goReplace('(.*)', 'report.txt', '2024_$1')).toBe('2024_report.txt');
    expect(goReplace('a*', 'baaac', '-')).toBe('-b-c-');
    expect(goReplace('x*', 'abc', '-')).toBe('-a-b-c-');
    expect(goReplace('x*', '', '-')).toBe('-');
    expect(goReplace('^', 'abc', '>')).toBe('>abc');
    expect(goReplace('$', 'abc', '<')).toBe('abc<');
    expect(goReplace('\\b', 'ab cd', '|')).toBe('|ab| |cd|');
    expect(goReplace('(?U)a+', 'aaa', '-')).toBe('---');
  });

  it('expands named groups, $$ and $1x in the replacement loop', () => {
    expect(goReplace('(?P<y>\\d{4})-(\\d+)', '2024-05-report.pdf', '${y}_$2')).toBe('2024_05-report.pdf');
    expect(goReplace('(?<y>\\d{4})', 'x2024', '[${y}]')).toBe('x[2024]');
    expect(goReplace('\\.', 'a.b.c', '$$')).toBe('a$b$c');
    expect(goReplace('(a)', 'cat', '$1x-')).toBe('c-t');
    expect(goReplace('(a)|(b)', 'ab', '[$1$2]')).toBe('[a][b]');
    expect(goReplace('(?P<y>\\d*)', '2024', '<${y}>')).toBe('<2024>');
    expect(goReplace('(?i)(?P<ext>JPE?G)$', 'a.jpeg', '${ext}!')).toBe('a.jpeg!');
  });

  it('works on code points: . is one code point, emoji and CJK names round-trip', () => {
    expect(goReplace('^(.)(.)(.)', '写真😀.jpg', '$3$2$1')).toBe('😀真写.jpg');
    expect(goReplace('(.*)', '写真😀.jpg', '$1')).toBe('写真😀.jpg');
    expect(goReplace('', '😀', '-')).toBe('-😀-');
    expect(goReplace('^.{3}\\.', '写真😀.jpg', 'x.')).toBe('x.jpg');
    expect(goReplace('(?P<n>\\p{Han}+)', 'IMG_写真.jpg', '<${n}>')).toBe('IMG_<写真>.jpg');
  });

  it('takes Go flags anywhere: (?i), (?s), (?m), scoped (?i:...)', () => {
    expect(goReplace('a(?i)b', 'aB', 'x')).toBe('x');
    expect(goReplace('(?i:A)b', 'ab aB', 'x')).toBe('x aB');
    expect(goReplace('(?s)a.b', 'a\nb', 'x')).toBe('x');
    expect(goReplace('a.b', 'a\nb', 'x')).toBe('a\nb');
    expect(goReplace('[[:digit:]]+\\z', 'v12', 'N')).toBe('vN');
  });

  it('refuses look-around and backreferences like Go', () => {
    expect(() => compileGoRegex('a(?=b)')).toThrow('error parsing regexp: invalid or unsupported Perl syntax: `(?=`');
    expect(() => compileGoRegex('a(?!b)')).toThrow('error parsing regexp: invalid or unsupported Perl syntax: `(?!`');
    expect(() => compileGoRegex('(?<=a)b')).toThrow(/^error parsing regexp: invalid named capture: /);
    expect(() => compileGoRegex('(?<!a)b')).toThrow(/^error parsing regexp: invalid named capture: /);
    expect(() => compileGoRegex('(a)\\1')).toThrow('error parsing regexp: invalid escape sequence: `\\1`');
    expect(() => compileGoRegex('(?P<n>a)\\k<n>')).toThrow('error parsing regexp: invalid escape sequence: `\\k`');
    expect(() => compileGoRegex('([a-')).toThrow('error parsing regexp: missing closing ]: `[a-`');
  });

  it('tests like Go MatchString, keeping the pattern text', () => {
    const re = compileGoRegex('(?P<d>\\d)');
    expect(re.source).toBe('(?P<d>\\d)');
    expect([re.test('a1b2'), re.test('ab'), re.test('ab')]).toEqual([true, false, false]);
  });
});

