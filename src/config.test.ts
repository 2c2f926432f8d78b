/**
 * Configuration (config.ts): values the server cannot use are refused with one line naming the key,
 * where the value came from and why, before anything exists on disk; unknown keys are a warning;
 * config.json is written atomically with mode 0600.
 */
import { chmod, link, mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from './config.js';

const dirs: string[] = [];
async function temp(): Promise<string> {
  const d = await mkdtemp(join(tmpdir(), 'treegate-config-'));
  dirs.push(d);
  return d;
}
afterEach(async () => {
  for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
});

/** loadConfig must refuse, with a message matching all of `parts`, and leave DATA uncreated. */
async function refused(env: Record<string, string>, file: unknown, parts: Array<string | RegExp>): Promise<string> {
  const root = await temp();
  const data = join(root, 'data');
  const flags: { data: string; config?: string } = { data };
  if (file !== undefined) {
    flags.config = join(root, 'config.json');
    await writeFile(flags.config, JSON.stringify(file));
  }
  const err = await loadConfig(flags, env).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ConfigError);
  const msg = (err as Error).message;
  for (const p of parts) expect(msg).toMatch(p);
  expect(msg).not.toContain('\n');
  await expect(stat(data)).rejects.toThrow(/ENOENT/); // nothing created
  return msg;
}

describe('the config file', () => {
  it('may start with a UTF-8 byte-order mark (as Windows Notepad saves it)', async () => {
    const root = await temp();
    const config = join(root, 'config.json');
    await writeFile(config, '\uFEFF' + JSON.stringify({ http: { port: 6123 }, jwt_secret: 'a-secret-of-enough-length-1234567' }));
    const c = await loadConfig({ data: join(root, 'data'), config }, {});
    expect(c.http.port).toBe(6123);
  });
});

describe('refused values', () => {
  it('site_url must be a URL or a path without .. (checked before anything is created)', async () => {
    await refused({ TREEGATE_SITE_URL: 'http://[nas/tg' }, undefined, ['site_url (from TREEGATE_SITE_URL): not a valid URL, got "http://[nas/tg"']);
    await refused({}, { site_url: '/tg/../x' }, [/^site_url \(from .*config\.json\): its path must not contain \.\. or backslashes/]);
  });

  it('token_expires_in must be positive (tokens would be born expired)', async () => {
    await refused({ TREEGATE_TOKEN_EXPIRES_IN: '-5' }, undefined, ['token_expires_in (from TREEGATE_TOKEN_EXPIRES_IN)', 'positive']);
    await refused({ TREEGATE_TOKEN_EXPIRES_IN: '0' }, undefined, ['token_expires_in', 'positive']);
    await refused({}, { token_expires_in: -3 }, [/token_expires_in \(from .*config\.json\)/, 'positive']);
    await refused({}, { token_expires_in: 0.0000001 }, ['token_expires_in']); // rounds to 0 s
  });

  it('ports: decimal digits only from the environment, 0-65535 from anywhere', async () => {
    await refused({ TREEGATE_HTTP_PORT: '0x4471' }, undefined, ['http.port (from TREEGATE_HTTP_PORT)', '0x4471']);
    await refused({ TREEGATE_HTTP_PORT: '1e3' }, undefined, ['http.port (from TREEGATE_HTTP_PORT)']);
    await refused({ TREEGATE_HTTP_PORT: '70000' }, undefined, ['http.port (from TREEGATE_HTTP_PORT): must be 0-65535']);
    await refused({ TREEGATE_SFTP_PORT: '-1' }, undefined, ['sftp.port (from TREEGATE_SFTP_PORT)']);
    await refused({}, { sftp: { port: 70000 } }, [/sftp\.port \(from .*config\.json\): must be 0-65535/]);
    await refused({}, { http: { port: 80.5 } }, ['http.port', '0-65535']);
  });

  it('other numbers from the environment are decimal', async () => {
    await refused({ TREEGATE_TOKEN_EXPIRES_IN: '0x10' }, undefined, ['token_expires_in (from TREEGATE_TOKEN_EXPIRES_IN)']);
    await refused({ TREEGATE_TOKEN_EXPIRES_IN: 'Infinity' }, undefined, ['token_expires_in']);
  });

  it("log.level must be one of pino's levels", async () => {
    await refused({ TREEGATE_LOG_LEVEL: 'loud' }, undefined, ['log.level (from TREEGATE_LOG_LEVEL)', 'info', 'warn', '"loud"']);
    await refused({}, { log: { level: 'verbose' } }, [/log\.level \(from .*config\.json\)/]);
  });

  it('trusted_proxies must be addresses (strings)', async () => {
    await refused({}, { trusted_proxies: [1, 2] }, [/trusted_proxies \(from .*config\.json\): expected an array of strings/]);
    await refused({}, { trusted_proxies: '10.0.0.1' }, ['trusted_proxies', 'array']);
    await refused({ TREEGATE_TRUSTED_PROXIES: '10.0.0.1,proxy.lan' }, undefined, ['trusted_proxies (from TREEGATE_TRUSTED_PROXIES)', 'proxy.lan']);
  });

  it('database: only the embedded store, and the value (maybe with a password) is not echoed', async () => {
    const m = await refused({ TREEGATE_DATABASE: 'postgres://u:hunter2@db/tg' }, undefined, ['database (from TREEGATE_DATABASE)', 'embedded']);
    expect(m).not.toContain('hunter2');
    await refused({}, { database: 'sqlite3' }, [/database \(from .*config\.json\)/]);
  });

  it('a config file that is a directory, and a data dir that is a file, are named', async () => {
    const root = await temp();
    await mkdir(join(root, 'cfg.json'));
    await expect(loadConfig({ data: join(root, 'data'), config: join(root, 'cfg.json') }, {})).rejects.toThrow(
      new ConfigError(`config file ${join(root, 'cfg.json')} (from --config): cannot read it: it is a directory`),
    );
    await writeFile(join(root, 'file'), 'x');
    await expect(loadConfig({}, { TREEGATE_DATA: join(root, 'file') })).rejects.toThrow(
      new ConfigError(`data dir ${join(root, 'file')} (from TREEGATE_DATA): exists and is not a directory`),
    );
    await mkdir(join(root, 'd2'));
    await mkdir(join(root, 'd2', 'config.json'));
    await expect(loadConfig({ data: join(root, 'd2') }, {})).rejects.toThrow(/config file .*d2\/config\.json \(from DATA\/config\.json\): cannot read it: it is a directory/);
  });
});

describe('accepted configuration', () => {
  it('decimal ports, positive hours, known levels and proxies; defaults written atomically with mode 0600', async () => {
    const root = await temp();
    const data = join(root, 'data');
    const cfg = await loadConfig(
      { data },
      { TREEGATE_HTTP_PORT: '8080', TREEGATE_SFTP_PORT: '0', TREEGATE_TOKEN_EXPIRES_IN: '0.5', TREEGATE_LOG_LEVEL: 'warn', TREEGATE_TRUSTED_PROXIES: '127.0.0.1, 10.0.0.0/8,::1,loopback' },
    );
    expect(cfg.http.port).toBe(8080);
    expect(cfg.sftp.port).toBe(0);
    expect(cfg.token_expires_in).toBe(0.5);
    expect(cfg.log.level).toBe('warn');
    expect(cfg.trusted_proxies).toEqual(['127.0.0.1', '10.0.0.0/8', '::1', 'loopback']);
    expect(cfg.warnings).toBeUndefined();
    expect((await stat(join(data, 'config.json'))).mode & 0o777).toBe(0o600);
    expect(await readdir(data)).toEqual(['config.json']); // no temp file left behind
    const written = JSON.parse(await readFile(join(data, 'config.json'), 'utf8'));
    expect(written.http.port).toBe(5244); // env overrides are not persisted
    expect(written.jwt_secret).toBe(cfg.jwt_secret);
  });

  it('config.json is rewritten atomically (a new file renamed over it, mode 0600), never in place', async () => {
    const root = await temp();
    const data = join(root, 'data');
    await mkdir(data);
    const file = join(data, 'config.json');
    await writeFile(file, JSON.stringify({ http: { port: 6000 } })); // no jwt_secret: it gets one
    await chmod(file, 0o644);
    await link(file, join(root, 'old-inode')); // an in-place write would change this one too
    const cfg = await loadConfig({ data }, {});
    expect(JSON.parse(await readFile(join(root, 'old-inode'), 'utf8'))).toEqual({ http: { port: 6000 } });
    const written = JSON.parse(await readFile(file, 'utf8'));
    expect(written.jwt_secret).toBe(cfg.jwt_secret);
    expect(written.http.port).toBe(6000);
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    expect(await readdir(data)).toEqual(['config.json']);
  });

  it('unknown keys in config.json are a warning naming them, not a refusal (a "//" key is a comment)', async () => {
    const root = await temp();
    const file = join(root, 'cfg.json');
    await writeFile(file, JSON.stringify({ '//': 'note', htpp: { port: 1 }, http: { prot: 2 }, jwt_secret: 'x'.repeat(30) }));
    const cfg = await loadConfig({ data: join(root, 'data'), config: file }, {});
    expect(cfg.warnings).toEqual([`config file ${file}: unknown keys ignored (typos?): htpp, http.prot`]);
    expect(cfg.http.port).toBe(5244);
  });

  it('unknown TREEGATE_* variables are a warning naming them; known ones and other variables are not', async () => {
    const root = await temp();
    const env = { TREEGATE_HTTP_PROT: '6000', TREEGATE_ADMIN_PASWORD: 'x', TREEGATE_HTTP_PORT: '6001', TREEGATE_ADMIN_PASSWORD: 'y', TREEGATE_SENDFILE: '0', HOME: '/root' };
    const cfg = await loadConfig({ data: join(root, 'data') }, env);
    expect(cfg.warnings).toEqual(['environment: unknown variables ignored (typos?): TREEGATE_ADMIN_PASWORD, TREEGATE_HTTP_PROT']);
    expect(cfg.http.port).toBe(6001);
  });
});
