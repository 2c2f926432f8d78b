/**
 * The root logger (log.ts) redacts secrets, except in access lines, and batches its lines. A line
 * must still come out while the process idles (the periodic flush), and none may be lost when the
 * process exits right after logging: those cases run the built logger (dist/, made by `npm test`'s
 * pretest build) in a child process, as the server runs it, with stdout a pipe.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { accessLogger, createLogger } from './log.js';

const BUILT = fileURLToPath(new URL('../dist/src/log.js', import.meta.url));

function child(script: string): { output: () => string; exited: Promise<number | null>; kill: () => void } {
  if (!existsSync(BUILT)) throw new Error(`${BUILT} is missing: run npm run build`);
  const code = `import { createLogger } from ${JSON.stringify(BUILT)}; const log = createLogger('info'); ${script}`;
  const c = spawn(process.execPath, ['--input-type=module', '-e', code], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  c.stdout.on('data', (d) => (out += d));
  return { output: () => out, exited: new Promise((r) => c.on('exit', r)), kill: () => c.kill('SIGKILL') };
}

/** A logger writing into an array of parsed lines. */
function capture(): { log: ReturnType<typeof createLogger>; lines: Array<Record<string, unknown>> } {
  const lines: Array<Record<string, unknown>> = [];
  const log = createLogger('info', { write: (s: string) => void lines.push(JSON.parse(s) as Record<string, unknown>) });
  return { log, lines };
}

describe('redaction', () => {
  it('hides secrets at the top level and one level down', () => {
    const { log, lines } = capture();
    log.info({ password: 'p1', body: { password: 'p2', token: 't' }, headers: { authorization: 'Basic x' }, user: 'ann' }, 'login');
    expect(lines[0]).toMatchObject({ password: '[redacted]', body: { password: '[redacted]', token: '[redacted]' }, headers: { authorization: '[redacted]' }, user: 'ann' });
  });

  it("is skipped by access loggers only, which keep their parent's bindings", () => {
    const { log, lines } = capture();
    const access = accessLogger(log.child({ proto: 'webdav' }));
    access.info({ method: 'PUT', path: '/a', status: 201, user: 'ann', key: 'not a secret here' }, 'webdav');
    log.info({ key: 'k' }, 'after');
    expect(lines[0]).toMatchObject({ app: 'treegate', proto: 'webdav', method: 'PUT', path: '/a', status: 201, user: 'ann', key: 'not a secret here' });
    expect(lines[1]).toMatchObject({ key: '[redacted]' });
  });
});

describe('batched log lines', () => {
  it('come out while the process idles', async () => {
    const c = child(`log.info('idle line'); setTimeout(() => {}, 60_000);`);
    try {
      await expect.poll(() => c.output(), { timeout: 10_000 }).toContain('idle line');
    } finally {
      c.kill();
    }
  });

  it('are all written when the process exits right after logging', async () => {
    const c = child(`for (let i = 0; i < 500; i++) log.info({ i }, 'burst'); process.exit(0);`);
    expect(await c.exited).toBe(0);
    const lines = c.output().trim().split('\n').map((l) => JSON.parse(l) as { i: number });
    expect(lines.map((l) => l.i)).toEqual(Array.from({ length: 500 }, (_, i) => i));
  });
});
