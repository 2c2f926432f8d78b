import { Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { runConformance } from '../conformance/suite.js';
import { memoryDefinition } from './index.js';
import { MemoryDriver } from './memory.js';

runConformance(memoryDefinition as never, async () => ({ options: {}, cleanup: async () => undefined }));

describe('Memory folder mtimes', () => {
  const OLD = new Date('2001-02-03T04:05:06Z');

  /** A driver with /a (holding file f) and /b, both folders dated OLD. */
  async function setup() {
    const d = new MemoryDriver();
    await d.init(new AbortController().signal);
    const root = await d.get('/');
    const a = await d.mkdir(root, 'a', {});
    await d.mkdir(root, 'b', {});
    await d.put(a, Readable.from([Buffer.from('x')]), { name: 'f' });
    for (const p of ['/a', '/b']) await d.setModified(await d.get(p), OLD);
    const mtime = async (p: string) => (await d.get(p)).modified.getTime();
    return { d, a: await d.get('/a'), b: await d.get('/b'), mtime };
  }

  it('change when an entry is added, renamed, moved, copied or removed, as on a POSIX file system', async () => {
    const cases: Array<[string, (s: Awaited<ReturnType<typeof setup>>) => Promise<unknown>, string[]]> = [
      ['put', (s) => s.d.put(s.a, Readable.from([Buffer.from('y')]), { name: 'g' }), ['/a']],
      ['mkdir', (s) => s.d.mkdir(s.a, 'sub', {}), ['/a']],
      ['rename', async (s) => s.d.rename(await s.d.get('/a/f'), 'f2'), ['/a']],
      ['move', async (s) => s.d.move(await s.d.get('/a/f'), s.b), ['/a', '/b']],
      ['copy', async (s) => s.d.copy(await s.d.get('/a/f'), s.b), ['/b']],
      ['remove', async (s) => s.d.remove(await s.d.get('/a/f'), {}), ['/a']],
    ];
    for (const [name, op, touched] of cases) {
      const s = await setup();
      await op(s);
      for (const p of ['/a', '/b']) {
        expect({ name, p, changed: (await s.mtime(p)) !== OLD.getTime() }).toEqual({ name, p, changed: touched.includes(p) });
      }
    }
  });
});
