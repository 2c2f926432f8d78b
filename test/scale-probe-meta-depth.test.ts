/**
 * Scale probe: meta rule checks on deep paths. Every fs/get, fs/list, PROPFIND and SFTP lookup asks
 * MetaRules whether the path is hidden; that walked each component and looked its folder's nearest
 * rule up afresh (itself a walk to `/`, re-joining the segments per level), so one check was cubic in
 * the depth: a 200-level path cost ~20,000 rule-map lookups and ~140 ms per fs/get. These tests
 * count the lookups (no timing) and compare the answers against a straightforward reference.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { PERM } from '../src/auth/principal.js';
import { makeCore, principal, type TestCore } from '../src/vfs/testing.js';

const DEPTH = 200;
const deepPath = (n: number) => Array.from({ length: n }, (_, i) => `/d${i}`).join('');

/** Map.get calls with a path key (the rule map's lookups) made while `fn` runs. */
async function ruleLookups(fn: () => Promise<unknown>): Promise<number> {
  const spy = vi.spyOn(Map.prototype, 'get');
  try {
    await fn();
    return spy.mock.calls.filter(([k]) => typeof k === 'string' && k.startsWith('/')).length;
  } finally {
    spy.mockRestore();
  }
}

describe('scale probe: meta rules on deep paths', () => {
  let core: TestCore;
  const nobody = principal(0);
  beforeEach(async () => {
    core = await makeCore();
  });
  afterEach(() => core.cleanup());

  it('isHidden and canAccess look up a number of rules linear in the depth', async () => {
    await core.metas.create({ path: '/', hide: '^\\.\n~$\n\\.tmp$', h_sub: true });
    const p = deepPath(DEPTH);
    await core.rules.isHidden(nobody, p); // rules loaded
    expect(await ruleLookups(() => core.rules.isHidden(nobody, p))).toBeLessThanOrEqual(2 * DEPTH + 2);
    expect(await ruleLookups(() => core.rules.canAccess(nobody, p, undefined))).toBeLessThanOrEqual(4 * DEPTH + 4);
    const check = await core.rules.accessChecker(nobody, undefined);
    expect(await ruleLookups(async () => check.canAccess(p))).toBeLessThanOrEqual(4 * DEPTH + 4);
  });

  it('gives the answers of the per-component rule (nearest rule of each folder, its h_sub, the base path)', async () => {
    // Reference: component i is hidden when the nearest rule of its folder applies there and matches.
    const rulesAt: Record<string, { hide: string; h_sub: boolean }> = {
      '/': { hide: '^x$', h_sub: true },
      '/a': { hide: '^y$', h_sub: false },
      '/a/b': { hide: '', h_sub: true },
      '/a/b/c': { hide: '^z$', h_sub: true },
      '/x/y': { hide: '^a$', h_sub: false },
    };
    for (const [path, r] of Object.entries(rulesAt)) await core.metas.create({ path, ...r });
    const reference = (vpath: string, basePath: string) => {
      const segs = vpath.split('/').filter(Boolean);
      const base = basePath === '/' || !(vpath === basePath || vpath.startsWith(basePath + '/')) ? 0 : basePath.split('/').filter(Boolean).length;
      for (let i = base; i < segs.length; i++) {
        const dir = '/' + segs.slice(0, i).join('/');
        let n = i;
        while (n >= 0 && !rulesAt['/' + segs.slice(0, n).join('/')]) n--;
        const r = n >= 0 ? rulesAt['/' + segs.slice(0, n).join('/')] : undefined;
        if (!r || r.hide === '' || !('/' + segs.slice(0, n).join('/') === dir || r.h_sub)) continue;
        if (r.hide.split('\n').some((l) => new RegExp(l).test(segs[i]!))) return true;
      }
      return false;
    };
    const names = ['a', 'b', 'c', 'x', 'y', 'z'];
    let seed = 7;
    const rnd = (n: number) => ((seed = (seed * 1103515245 + 12345) % 2 ** 31), seed % n);
    const bases = ['/', '/a', '/a/b', '/x'];
    for (let k = 0; k < 400; k++) {
      const depth = 1 + rnd(7);
      const vpath = '/' + Array.from({ length: depth }, () => names[rnd(names.length)]).join('/');
      const basePath = bases[rnd(bases.length)]!;
      const p = principal(0, basePath);
      expect(await core.rules.isHidden(p, vpath), `${vpath} (base ${basePath})`).toBe(reference(vpath, basePath));
    }
    expect(await core.rules.isHidden(principal(PERM.SEE_HIDDEN), '/x')).toBe(false);
  });
});
