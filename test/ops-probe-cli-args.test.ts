/**
 * `treegate server /srv/treegate` (--data forgotten) must not start a server on a new ./data in the
 * working directory with a new admin: the stray argument is refused, nothing is created.
 */
import { spawnSync } from 'node:child_process';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { CLI, cliEnv } from './clients/process.js';

const dirs: string[] = [];
afterEach(async () => {
  for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
});

it('server refuses a positional argument (a forgotten --data) and creates nothing', async () => {
  const cwd = await mkdtemp(join(tmpdir(), 'treegate-ops-args-'));
  dirs.push(cwd);
  const wanted = join(cwd, 'srv');
  // Bounded: before the fix this started a server and never returned by itself.
  const r = spawnSync(process.execPath, [CLI, 'server', wanted], { cwd, env: cliEnv(), encoding: 'utf8', timeout: 15_000, killSignal: 'SIGKILL' });
  expect(r.signal).toBeNull();
  expect(r.status).toBe(2);
  expect(r.stderr).toContain(`server takes no arguments, got ${JSON.stringify(wanted)} (meant --data ${wanted}?)`);
  expect(await readdir(cwd)).toEqual([]);
});
