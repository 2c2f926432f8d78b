import { mkdtemp } from 'node:fs/promises';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseOptions } from '../options.js';
import { runConformance } from '../conformance/suite.js';
import { codeOf, names, NO_ARGS, rootObj } from '../conformance/helpers.js';
import type { Driver, DriverDefinition } from '../types.js';
import { cutProxy, freePort, initAgainstMuteServer } from '../testing/process.js';
import { startSshd, type Sshd } from '../testing/sshd.js';
import { sftpDefinition } from './index.js';

const def = sftpDefinition as unknown as DriverDefinition;
const log = pino({ level: 'silent' });

describe('SFTP driver against OpenSSH sshd', () => {
  let sshd: Sshd;
  beforeAll(async () => { sshd = await startSshd(); });
  afterAll(async () => { await sshd?.stop(); });

  const optionsFor = (extra: Record<string, unknown> = {}) => parseOptions(def, {
    address: `127.0.0.1:${sshd.port}`, username: sshd.user, private_key: sshd.privateKey, root_folder_path: sshd.dataDir, ...extra,
  });

  runConformance(def, async () => ({ options: optionsFor(), cleanup: async () => undefined }));

  it('reconnects after the server drops the connection', async () => {
    const proxy = await cutProxy(sshd.port);
    const d = await def.create(optionsFor({ address: `127.0.0.1:${proxy.port}` }), { log, dataDir: '/x' }) as Required<Driver>;
    try {
      await d.init(AbortSignal.timeout(10_000));
      await d.put(rootObj, Readable.from([Buffer.from('still here')]), { name: 'reconnect.txt' });
      proxy.cut();
      await new Promise((r) => setTimeout(r, 100));
      expect(await names(d, '/')).toContain('reconnect.txt');
      proxy.cut();
      expect((await d.get('/reconnect.txt', NO_ARGS)).size).toBe(10);
      await d.remove(await d.get('/reconnect.txt', NO_ARGS), NO_ARGS);
    } finally {
      await d.drop();
      await proxy.close();
    }
  });

  it('fails init quickly and clearly: wrong password, dead port, missing root, abort', async () => {
    const bad = await def.create(optionsFor({ private_key: '', password: 'wrong-password' }), { log, dataDir: '/x' });
    await expect(bad.init(AbortSignal.timeout(10_000))).rejects.toThrow(/authentication failed for user/);
    const dead = await def.create(optionsFor({ address: `127.0.0.1:${await freePort()}` }), { log, dataDir: '/x' });
    await expect(dead.init(AbortSignal.timeout(10_000))).rejects.toThrow(/ECONNREFUSED/);
    const missing = await def.create(optionsFor({ root_folder_path: join(sshd.dataDir, 'nope') }), { log, dataDir: '/x' });
    await expect(missing.init(AbortSignal.timeout(10_000))).rejects.toThrow(/root folder .* not exists/);
    await missing.drop();
    const mute = await initAgainstMuteServer((port) => def.create(optionsFor({ address: `127.0.0.1:${port}` }), { log, dataDir: '/x' }), codeOf);
    expect(mute.code).toBe('UPSTREAM');
    expect(mute.ms).toBeLessThan(3000);
  });

  it('uploads through a temporary name and leaves no temp files', async () => {
    const root = await mkdtemp(join(sshd.dataDir, 'tmpcheck-'));
    const d = await def.create(optionsFor({ root_folder_path: root }), { log, dataDir: '/x' }) as Required<Driver>;
    await d.init(AbortSignal.timeout(10_000));
    await d.put(rootObj, Readable.from([Buffer.from('a')]), { name: 'x' });
    await d.put(rootObj, Readable.from([Buffer.from('bb')]), { name: 'x' });
    expect(await names(d, '/')).toEqual(['x']);
    expect((await d.get('/x', NO_ARGS)).size).toBe(2);
    expect((await d.usage(NO_ARGS)).total).toBeGreaterThan(0);
    await d.drop();
  });
});
