/**
 * The systemd unit (systemd/treegate.service): valid for systemd, and least privilege by default.
 */
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';

const UNIT = new URL('../systemd/treegate.service', import.meta.url).pathname;

function directives(text: string): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const line of text.split('\n')) {
    const m = /^([A-Za-z]+)=(.*)$/.exec(line.trim());
    if (m) out.set(m[1]!, [...(out.get(m[1]!) ?? []), m[2]!]);
  }
  return out;
}

describe('systemd unit', () => {
  it('runs as its own user with least privilege, writable only in its data dir', async () => {
    const d = directives(await readFile(UNIT, 'utf8'));
    const one = (k: string) => d.get(k)?.at(-1);
    expect(one('User')).toBe('treegate');
    expect(one('NoNewPrivileges')).toBe('true');
    expect(one('ProtectSystem')).toBe('strict');
    expect(one('ReadWritePaths')).toBe('/var/lib/treegate');
    expect(one('PrivateTmp')).toBe('true');
    expect(one('ProtectHome')).toBe('true');
    expect(one('CapabilityBoundingSet')).toBe('');
    expect(one('Restart')).toBe('on-failure');
    expect(one('EnvironmentFile')).toMatch(/^-\//); // optional env file
    expect(one('ExecStart')).toContain('cli.js server');
    expect(d.get('Environment')).toContain('TREEGATE_DATA=/var/lib/treegate');
  });

  it('passes systemd-analyze verify', async () => {
    const r = await new Promise<{ code: number | null; out: string }>((resolve) =>
      execFile('systemd-analyze', ['verify', UNIT], { timeout: 30_000 }, (err, stdout, stderr) =>
        resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, out: stdout + stderr }),
      ),
    );
    expect(r.out.split('\n').filter((l) => l.includes('treegate.service'))).toEqual([]);
    expect(r.code).toBe(0);
  });
});
