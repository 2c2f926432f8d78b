import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { PERM } from '../auth/principal.js';
import { isVfsError } from '../errors.js';
import { compileHide, validateHide } from './meta.js';
import { makeCore, principal, type TestCore } from './testing.js';

describe('MetaRules', () => {
  let core: TestCore;
  const nobody = principal(0);
  beforeEach(async () => {
    core = await makeCore();
  });
  afterEach(() => core.cleanup());
  const meta = (path: string, extra: Record<string, unknown> = {}) => core.metas.create({ path, ...extra });

  it('uses the nearest rule only, exact path first, then parents up to /', async () => {
    await meta('/', { readme: 'root', r_sub: true });
    await meta('/a/b', { readme: 'ab' });
    expect((await core.rules.nearest('/a/b/c'))?.path).toBe('/a/b');
    expect((await core.rules.nearest('/a/bc'))?.path).toBe('/');
    expect((await core.rules.facts(nobody, '/a/b')).readme).toBe('ab');
    expect((await core.rules.facts(nobody, '/a/b/c')).readme).toBe(''); // nearest is /a/b without r_sub
    expect((await core.rules.facts(nobody, '/x')).readme).toBe('root');
  });

  it('password: p_sub extends to descendants, a deeper rule without password overrides, bit1 bypasses', async () => {
    await meta('/p', { password: 'pw' });
    await meta('/s', { password: 'pw', p_sub: true });
    await meta('/s/open');
    const ok = (v: string, pw?: string, p = nobody) => core.rules.canAccess(p, v, pw);
    expect(await ok('/p')).toBe(false);
    expect(await ok('/p', 'pw')).toBe(true);
    expect(await ok('/p', 'PW')).toBe(false);
    expect(await ok('/p/child')).toBe(true);
    expect(await ok('/s/child')).toBe(false);
    expect(await ok('/s/child', 'pw')).toBe(true);
    expect(await ok('/s/open/x')).toBe(true);
    expect(await ok('/s/child', undefined, principal(PERM.NO_PASSWORD))).toBe(true);
    expect((await core.rules.facts(nobody, '/s/child')).passwordProtected).toBe(true);
    expect((await core.rules.facts(nobody, '/p/child')).passwordProtected).toBe(false);
  });

  it('hide: applies to the children of its folder (descendant folders with h_sub), on every component, bit0 bypasses', async () => {
    await meta('/h', { hide: '^secret$\n\\.tmp$' });
    await meta('/deep', { hide: 'x', h_sub: true });
    expect(await core.rules.hidePatterns(nobody, '/h')).toHaveLength(2);
    expect(await core.rules.hidePatterns(nobody, '/h/sub')).toHaveLength(0);
    expect(await core.rules.hidePatterns(nobody, '/deep/a/b')).toHaveLength(1);
    expect(await core.rules.isHidden(nobody, '/h/secret')).toBe(true);
    expect(await core.rules.isHidden(nobody, '/h/secret/inner/file')).toBe(true);
    expect(await core.rules.isHidden(nobody, '/h/a.tmp')).toBe(true);
    expect(await core.rules.isHidden(nobody, '/h/secrets')).toBe(false);
    expect(await core.rules.isHidden(principal(PERM.SEE_HIDDEN), '/h/secret')).toBe(false);
    await expect(core.rules.assertAccess(nobody, '/h/secret', undefined)).rejects.toMatchObject({ code: 'NOT_FOUND' });
  });

  it('hide never tests the folders down to the user\'s base path: a hidden parent does not lock its users out', async () => {
    await meta('/users', { hide: '^alice$' });
    await meta('/users/alice', { hide: '^private$' });
    const alice = principal(0, '/users/alice');
    expect(await core.rules.isHidden(nobody, '/users/alice/report.txt')).toBe(true);
    expect(await core.rules.isHidden(alice, '/users/alice')).toBe(false);
    expect(await core.rules.isHidden(alice, '/users/alice/report.txt')).toBe(false);
    // Below the base path the rules hold as for anyone.
    expect(await core.rules.isHidden(alice, '/users/alice/private')).toBe(true);
  });

  it('an empty hide line hides everything', async () => {
    await meta('/all', { hide: 'nothing\n' });
    expect(await core.rules.isHidden(nobody, '/all/anything')).toBe(true);
  });

  it('write: bit3, or a meta write on the folder itself, or on ancestors with w_sub', async () => {
    await meta('/w', { write: true });
    await meta('/ws', { write: true, w_sub: true });
    expect(await core.rules.canWrite(nobody, '/w')).toBe(true);
    expect(await core.rules.canWrite(nobody, '/w/sub')).toBe(false);
    expect(await core.rules.canWrite(nobody, '/ws/a/b')).toBe(true);
    expect(await core.rules.canWrite(nobody, '/other')).toBe(false);
    expect(await core.rules.canWrite(principal(PERM.WRITE), '/other')).toBe(true);
  });

  it('header follows header_sub', async () => {
    await meta('/hd', { header: 'H', header_sub: true, readme: 'R' });
    expect(await core.rules.facts(nobody, '/hd/x')).toMatchObject({ header: 'H', readme: '' });
  });

  it('MetaService cleans paths, validates hide, keeps paths unique and drops the cache', async () => {
    const m = await meta('a//b/', { readme: 'one' });
    expect(m.path).toBe('/a/b');
    expect((await core.rules.facts(nobody, '/a/b')).readme).toBe('one');
    await core.metas.update({ ...m, readme: 'two' });
    expect((await core.rules.facts(nobody, '/a/b')).readme).toBe('two');
    await expect(meta('/a/b')).rejects.toMatchObject({ code: 'EXISTS', message: 'UNIQUE constraint failed: x_meta.path' });
    await expect(meta('/bad', { hide: 'ok\n(unclosed' })).rejects.toMatchObject({ code: 'INVALID' });
    await core.metas.delete(m.id);
    expect((await core.rules.facts(nobody, '/a/b')).readme).toBe('');
    await expect(core.metas.get(m.id)).rejects.toMatchObject({ message: 'failed get old meta: record not found' });
  });

  it('validateHide names the bad line', () => {
    try {
      validateHide('fine\n[z-a]');
      expect.unreachable();
    } catch (e) {
      expect(isVfsError(e, 'INVALID')).toBe(true);
      expect((e as Error).message).toMatch(/^\[z-a\] is illegal: /);
    }
  });

  it('takes a leading inline option group as AList (regexp2) does: (?i) is case-insensitive', () => {
    const [ci, cs, multi] = compileHide('(?i)^secret\n^secret\n(?is)^a.b$');
    expect([ci!.test('SECRET.txt'), cs!.test('SECRET.txt'), cs!.test('secret.txt')]).toEqual([true, false, true]);
    expect(multi!.test('A\nB')).toBe(true);
    expect(() => validateHide('(?i)^ok')).not.toThrow();
    expect(() => validateHide('(?x)a b')).toThrow(/is illegal/); // no JS form: refused, not misread
  });
});
