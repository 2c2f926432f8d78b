/** IndexScope.childFilter, the build's per-folder shortcut, answers exactly what accepts() answers for each child. */
import { afterEach, beforeEach, expect, it } from 'vitest';
import { Settings } from '../settings/settings.js';
import { makeCore, storage, type TestCore } from '../vfs/testing.js';
import { IndexScope } from './scope.js';

let core: TestCore;
beforeEach(async () => {
  core = await makeCore();
});
afterEach(() => core.cleanup());

it('childFilter(dir)(name) equals accepts(dir/name) without the depth limit', async () => {
  for (const [path, off] of [['/', false], ['/m', false], ['/m/x', true], ['/n', true], ['/n/y', false], ['/n/y/z/w', true]] as const) {
    await core.storages.create(storage(path, 'Memory', { disable_index: off }));
  }
  const settings = await Settings.load(core.store, 'test');
  await settings.save({ max_index_depth: '1' }); // childFilter never limits depth: the job does
  const scope = new IndexScope(settings, core.mounts);
  const ignore = ['/m/a', '/n/y/b', '/q', '/m/x/c/d'];
  const dirs = ['/', '/m', '/m/a', '/m/x', '/m/x/c', '/n', '/n/y', '/n/y/z', '/q', '/r'];
  const names = ['a', 'b', 'c', 'd', 'm', 'n', 'q', 'r', 'w', 'x', 'y', 'z'];
  let refused = 0;
  for (const dir of dirs) {
    const accepts = scope.childFilter(dir, ignore);
    for (const name of names) {
      const child = dir === '/' ? `/${name}` : `${dir}/${name}`;
      const expected = scope.accepts(child, { ignore, depth: false });
      expect([child, accepts(name)]).toEqual([child, expected]);
      if (!expected) refused++;
    }
  }
  // Ignored paths, their subtrees and each non-indexed storage all refuse something here.
  expect(refused).toBeGreaterThan(30);
  expect(scope.childFilter('/', ignore)('m')).toBe(true);
  expect(scope.childFilter('/m', ignore)('x')).toBe(false);
  expect(scope.childFilter('/n/y', ignore)('z')).toBe(true);
  expect(scope.childFilter('/n/y/z', ignore)('w')).toBe(false);
});
