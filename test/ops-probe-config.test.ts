/**
 * Configuration as an operator writes it: an empty `TREEGATE_DATA=` line in the env file, and a
 * read-only config file (in /etc under the unit's ProtectSystem=strict) with the JWT secret kept in
 * the environment instead.
 */
import { spawnSync } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterEach, expect, it, vi } from 'vitest';
import { loadConfig, resolveDataDir } from '../src/config.js';
import { AtomicJsonFile } from '../src/store/atomic-file.js';
import { CLI } from './clients/process.js';

const dirs: string[] = [];
async function temp(): Promise<string> {
  const d = await mkdtemp(join(tmpdir(), 'treegate-ops-config-'));
  dirs.push(d);
  return d;
}
afterEach(async () => {
  vi.restoreAllMocks();
  for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
});

it('an empty TREEGATE_DATA is unset (./data), never the working directory itself', async () => {
  expect(resolveDataDir({}, { TREEGATE_DATA: '' })).toBe(resolve('data'));
  // The built CLI, run from a folder that is not a data dir: `admin show` only reads, and names the
  // store it looked for (it was <cwd>/store.json: a server would have chmod'ed cwd 0700 and filled it).
  const cwd = await temp();
  const r = spawnSync(process.execPath, [CLI, 'admin', 'show'], { cwd, env: { PATH: process.env.PATH, TREEGATE_DATA: '' }, encoding: 'utf8' });
  expect(r.status).toBe(1);
  expect(r.stderr).toContain(`no store at ${join(cwd, 'data', 'store.json')}`);
});

it('a config file without jwt_secret is not rewritten when TREEGATE_JWT_SECRET gives the secret', async () => {
  const root = await temp();
  const etc = join(root, 'etc');
  await mkdir(etc);
  const file = join(etc, 'config.json');
  await writeFile(file, JSON.stringify({ log: { level: 'warn' } }));
  // As on a read-only /etc (root ignores file modes, so the refusal is simulated).
  const write = vi.spyOn(AtomicJsonFile.prototype, 'write').mockRejectedValue(Object.assign(new Error('EROFS: read-only file system'), { code: 'EROFS' }));
  const cfg = await loadConfig({ data: join(root, 'data'), config: file }, { TREEGATE_JWT_SECRET: 's'.repeat(32) });
  expect(cfg.jwt_secret).toBe('s'.repeat(32));
  expect(cfg.log.level).toBe('warn');
  expect(write).not.toHaveBeenCalled();
  // Without a secret anywhere one must be saved: the refusal says how to give one.
  await expect(loadConfig({ data: join(root, 'data'), config: file }, {})).rejects.toThrow(/cannot write it: read-only file system.*TREEGATE_JWT_SECRET/);
});
