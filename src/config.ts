/**
 * Configuration, resolved once at start-up with the contract's precedence:
 * command-line flag > TREEGATE_* environment variable > DATA/config.json > config/default.json.
 * DATA/config.json is written with the defaults on first start (and a generated jwt_secret).
 */
import { randomBytes } from 'node:crypto';
import { chmod, mkdir, readFile, writeFile } from 'node:fs/promises';
import { resolve, join } from 'node:path';
import defaults from '../config/default.json' with { type: 'json' };

export interface Config {
  dataDir: string;
  configFile: string;
  http: { address: string; port: number };
  sftp: { enable: boolean; address: string; port: number; idle_timeout: number };
  webdav: { enable: boolean };
  token_expires_in: number;
  jwt_secret: string;
  database: string;
  log: { level: string };
  site_url: string;
  dist_dir: string;
  temp_dir: string;
  trusted_proxies: string[];
  max_json_body: number;
}

export type FileConfig = Omit<Config, 'dataDir' | 'configFile'>;

export interface ConfigFlags {
  data?: string;
  config?: string;
}

/** env var → config key path; values are parsed by the type of the default. */
const ENV: Array<[string, string[]]> = [
  ['TREEGATE_HTTP_ADDRESS', ['http', 'address']],
  ['TREEGATE_HTTP_PORT', ['http', 'port']],
  ['TREEGATE_SFTP_ENABLE', ['sftp', 'enable']],
  ['TREEGATE_SFTP_ADDRESS', ['sftp', 'address']],
  ['TREEGATE_SFTP_PORT', ['sftp', 'port']],
  ['TREEGATE_WEBDAV_ENABLE', ['webdav', 'enable']],
  ['TREEGATE_TOKEN_EXPIRES_IN', ['token_expires_in']],
  ['TREEGATE_JWT_SECRET', ['jwt_secret']],
  ['TREEGATE_DATABASE', ['database']],
  ['TREEGATE_LOG_LEVEL', ['log', 'level']],
  ['TREEGATE_SITE_URL', ['site_url']],
  ['TREEGATE_DIST_DIR', ['dist_dir']],
  ['TREEGATE_TEMP_DIR', ['temp_dir']],
  ['TREEGATE_TRUSTED_PROXIES', ['trusted_proxies']],
];

export const DEFAULT_CONFIG: FileConfig = defaults as FileConfig;

type Json = Record<string, unknown>;

function isObj(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Deep-merge `over` onto `base`, keeping only keys that exist in `base` typed like base's values. */
function merge(base: Json, over: Json, where: string): Json {
  const out: Json = { ...base };
  for (const [k, v] of Object.entries(over)) {
    if (!(k in base)) continue; // unknown keys (comments, newer versions) are ignored
    const b = base[k];
    if (isObj(b)) {
      if (!isObj(v)) throw new Error(`config ${where}${k}: expected an object`);
      out[k] = merge(b, v, `${where}${k}.`);
    } else if (Array.isArray(b)) {
      if (!Array.isArray(v)) throw new Error(`config ${where}${k}: expected an array`);
      out[k] = v;
    } else if (typeof v !== typeof b) {
      throw new Error(`config ${where}${k}: expected a ${typeof b}, got ${JSON.stringify(v)}`);
    } else out[k] = v;
  }
  return out;
}

function parseEnv(raw: string, like: unknown, name: string): unknown {
  if (typeof like === 'number') {
    const n = Number(raw);
    if (!Number.isFinite(n) || raw.trim() === '') throw new Error(`${name}: expected a number, got ${JSON.stringify(raw)}`);
    return n;
  }
  if (typeof like === 'boolean') {
    if (/^(true|1|yes|on)$/i.test(raw)) return true;
    if (/^(false|0|no|off)$/i.test(raw)) return false;
    throw new Error(`${name}: expected true or false, got ${JSON.stringify(raw)}`);
  }
  if (Array.isArray(like)) return raw.split(',').map((s) => s.trim()).filter(Boolean);
  return raw;
}

function setPath(obj: Json, path: string[], value: unknown): void {
  let o = obj;
  for (const k of path.slice(0, -1)) o = o[k] as Json;
  o[path[path.length - 1]!] = value;
}

function getPath(obj: Json, path: string[]): unknown {
  return path.reduce<unknown>((o, k) => (o as Json)[k], obj);
}

/** The data dir from flag > env > default, absolute. */
export function resolveDataDir(flags: ConfigFlags, env: NodeJS.ProcessEnv = process.env): string {
  return resolve(flags.data ?? env.TREEGATE_DATA ?? './data');
}

/**
 * Load the configuration. Creates DATA (0700) and writes DATA/config.json with defaults when missing;
 * a missing jwt_secret is generated and saved there so tokens survive restarts.
 */
export async function loadConfig(flags: ConfigFlags = {}, env: NodeJS.ProcessEnv = process.env): Promise<Config> {
  const dataDir = resolveDataDir(flags, env);
  await mkdir(dataDir, { recursive: true, mode: 0o700 });
  await chmod(dataDir, 0o700);
  const configFile = resolve(flags.config ?? join(dataDir, 'config.json'));

  let fileText: string | undefined;
  try {
    fileText = await readFile(configFile, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
  }
  let fromFile: Json = {};
  if (fileText !== undefined) {
    try {
      fromFile = JSON.parse(fileText) as Json;
    } catch (e) {
      throw new Error(`config file ${configFile} is not valid JSON: ${(e as Error).message}`);
    }
    if (!isObj(fromFile)) throw new Error(`config file ${configFile} must hold a JSON object`);
  }
  const base = structuredClone(DEFAULT_CONFIG) as unknown as Json;
  const fileMerged = merge(base, fromFile, '');

  if (!fileMerged.jwt_secret || fileText === undefined) {
    // Persist defaults (and a secret) so the next start finds the same values.
    if (!fileMerged.jwt_secret) fileMerged.jwt_secret = randomBytes(24).toString('base64url');
    await writeFile(configFile, JSON.stringify({ ...fromFile, ...fileMerged }, null, 2) + '\n', { mode: 0o600 });
  }

  const merged = structuredClone(fileMerged);
  for (const [name, path] of ENV) {
    const raw = env[name];
    if (raw === undefined || raw === '') continue;
    setPath(merged, path, parseEnv(raw, getPath(base, path), name));
  }
  const cfg = { ...(merged as unknown as FileConfig), dataDir, configFile };
  if (!cfg.sftp.address) cfg.sftp.address = cfg.http.address;
  return cfg;
}
