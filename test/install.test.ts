/**
 * Installing and running treegate the documented ways: README's "Run it as a service" copies every
 * file `npm run build` needs, and `npm start` hands signals to the server (systemd, a terminal's
 * Ctrl-C, a supervisor's SIGTERM to npm) instead of orphaning it.
 */
import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';

const root = new URL('..', import.meta.url).pathname;
const pkg = JSON.parse(await readFile(join(root, 'package.json'), 'utf8')) as { scripts: Record<string, string>; files: string[] };

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0)) await c();
});

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe('README, "Run it as a service"', () => {
  it("copies everything the build needs (the package's files, the sources, the lock file)", async () => {
    const readme = await readFile(join(root, 'README.md'), 'utf8');
    const section = readme.slice(readme.indexOf('## Run it as a service'));
    const cp = /sudo cp -r (.+) \/opt\/treegate\/\n/.exec(section);
    expect(cp, 'the cp line').toBeTruthy();
    const copied = new Set(cp![1]!.trim().split(/\s+/));
    // Everything the published package holds, except dist (built there), by its top-level name.
    const needed = new Set(pkg.files.map((f) => f.split('/')[0]!).filter((f) => f !== 'dist'));
    for (const f of ['package.json', 'package-lock.json', 'tsconfig.json', 'src', 'protocols', 'drivers']) needed.add(f);
    // And whatever the build script runs.
    for (const m of pkg.scripts.build!.matchAll(/node (\S+)/g)) needed.add(m[1]!.split('/')[0]!);
    expect([...needed].filter((f) => !copied.has(f))).toEqual([]);
    // The unit runs what was built there.
    const unit = await readFile(join(root, 'systemd/treegate.service'), 'utf8');
    expect(unit).toMatch(/^WorkingDirectory=\/opt\/treegate$/m);
    expect(unit).toMatch(/^ExecStart=\/usr\/bin\/node \/opt\/treegate\/dist\/src\/cli\.js server$/m);
  });
});

describe('npm start', () => {
  it('a SIGTERM to npm reaches the server (no orphan keeping the ports)', async () => {
    // The real start script, run by the real npm, against a stand-in server that reports the signal.
    const dir = await mkdtemp(join(tmpdir(), 'treegate-npm-start-'));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    await writeFile(join(dir, 'package.json'), JSON.stringify({ name: 'start-probe', private: true, scripts: { start: pkg.scripts.start } }));
    await mkdir(join(dir, 'dist/src'), { recursive: true });
    await writeFile(
      join(dir, 'dist/src/cli.js'),
      `process.on('SIGTERM', () => { console.log('stub: SIGTERM'); process.exit(0); });
       console.log('stub ready ' + process.pid + ' ' + process.argv.slice(2).join(' '));
       setTimeout(() => {}, 60_000);`,
    );
    const npm = spawn('npm', ['start', '--', '--data', 'x'], { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    npm.stdout.on('data', (b: Buffer) => (out += b.toString()));
    npm.stderr.on('data', (b: Buffer) => (out += b.toString()));
    const npmExited = new Promise<number | null>((res) => npm.once('exit', (code) => res(code)));
    const until = Date.now() + 30_000;
    while (!/stub ready (\d+)/.test(out)) {
      if (Date.now() > until) throw new Error(`no stub ready line:\n${out}`);
      await new Promise((r) => setTimeout(r, 20));
    }
    const [, pid, args] = /stub ready (\d+) (.*)/.exec(out)!;
    cleanups.push(() => void (alive(Number(pid)) && process.kill(Number(pid), 'SIGKILL')));
    expect(args).toBe('server --data x'); // `npm start -- ARGS` is `treegate server ARGS`
    npm.kill('SIGTERM');
    await npmExited;
    const gone = Date.now() + 5_000;
    while (alive(Number(pid)) && Date.now() < gone) await new Promise((r) => setTimeout(r, 20));
    expect(alive(Number(pid)), out).toBe(false);
    expect(out).toContain('stub: SIGTERM');
  });
});
