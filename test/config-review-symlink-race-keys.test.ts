/**
 * Config loading (src/config.ts), proved against the built CLI (dist/src/cli.js) or loadConfig,
 * with a temp data dir: a symlinked DATA/config.json, two first starts at once, odd key names.
 */
import { lstat, mkdir, readdir, readFile, symlink, writeFile } from 'node:fs/promises';
import { loadConfig } from '../src/config.js';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { cliEnv, startServerProcess, tempDataDirs, type ServerProcess } from './clients/process.js';

const dirs = tempDataDirs('treegate-cli-review-');
const running: ServerProcess[] = [];

afterEach(async () => {
  for (const p of running.splice(0)) {
    if (p.child.exitCode === null) p.child.kill('SIGTERM');
    await p.exited;
  }
  await dirs.cleanup();
});

async function stop(p: ServerProcess): Promise<number | null> {
  p.child.kill('SIGTERM');
  return p.exited;
}

describe('cli-config-review: config file', () => {
  it('a DATA/config.json that is a symlink (to /etc) stays one: the generated jwt_secret goes to its target', async () => {
    const data = await dirs.next();
    const etc = join(data, '..', 'etc');
    await mkdir(data, { recursive: true });
    await mkdir(etc);
    const target = join(etc, 'config.json');
    await writeFile(target, JSON.stringify({ log: { level: 'warn' } }));
    await symlink(target, join(data, 'config.json'));

    const p = await startServerProcess(['--data', data], cliEnv({ TREEGATE_SFTP_ENABLE: 'false' }));
    running.push(p);
    expect(await stop(p)).toBe(0);

    // The rename over the link replaced it with a copy: later edits of the operator's file in /etc
    // were silently ignored from then on.
    expect((await lstat(join(data, 'config.json'))).isSymbolicLink()).toBe(true);
    const saved = JSON.parse(await readFile(target, 'utf8')) as { jwt_secret: string; log: { level: string } };
    expect(saved.jwt_secret.length).toBeGreaterThanOrEqual(16);
    expect(saved.log.level).toBe('warn');
  });

  it('a key named like an Object.prototype member (constructor, toString) is an unknown key warned about, not a refused start', async () => {
    const data = await dirs.next();
    await mkdir(data, { recursive: true });
    await writeFile(join(data, 'config.json'), JSON.stringify({ constructor: {}, http: { toString: 'x' } }));
    // It was refused as `constructor (from ...): expected a function, got {}` and the server never started.
    const p = await startServerProcess(['--data', data], cliEnv({ TREEGATE_SFTP_ENABLE: 'false' }));
    running.push(p);
    expect(p.output()).toMatch(/unknown keys ignored \(typos\?\): constructor, http\.toString/);
    expect(await stop(p)).toBe(0);
  });

  it('two starts at once on a new data dir end up with one jwt_secret, the one saved in config.json', async () => {
    const data = await dirs.next();
    // As two `treegate server` started together (a unit and a manual run): each generated a secret
    // and wrote it over the other's, and the one that won DATA could run with the secret the file no
    // longer held, so every token it issued died at its next restart (seen with two real servers).
    const [a, b] = await Promise.all([loadConfig({ data }, {}), loadConfig({ data }, {})]);
    const saved = (JSON.parse(await readFile(join(data, 'config.json'), 'utf8')) as { jwt_secret: string }).jwt_secret;
    expect(a.jwt_secret).toBe(saved);
    expect(b.jwt_secret).toBe(saved);
    expect((await readdir(data)).filter((n) => n.endsWith('.tmp'))).toEqual([]);
  });
});
