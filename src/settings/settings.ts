/**
 * Site settings: the catalogue's defaults overlaid with stored values, held in memory for cheap
 * synchronous reads on hot paths (signing, listing) and written through the store.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { VfsError } from '../errors.js';
import type { Store } from '../store/store.js';
import { CATALOG, FLAG, type SettingDef } from './catalog.js';

export interface SettingItem extends SettingDef {
  value: string;
}

const BY_KEY = new Map(CATALOG.map((d) => [d.key, d]));

export class Settings {
  private values: Record<string, string> = {};

  private constructor(private readonly store: Store, private readonly version: string) {}

  static async load(store: Store, version: string): Promise<Settings> {
    const s = new Settings(store, version);
    await s.reload();
    const stored = await store.settings.all();
    if (!stored.token) await s.save({ token: newApiToken() }); // the admin API token and sign key
    store.onExternalChange(() => void s.reload());
    return s;
  }

  private async reload(): Promise<void> {
    const stored = await this.store.settings.all();
    const values: Record<string, string> = {};
    for (const d of CATALOG) values[d.key] = d.default;
    Object.assign(values, stored, { version: this.version });
    this.values = values;
  }

  get(key: string): string {
    return this.values[key] ?? '';
  }

  bool(key: string): boolean {
    return this.get(key) === 'true';
  }

  number(key: string): number {
    const n = Number(this.get(key));
    return Number.isFinite(n) ? n : 0;
  }

  def(key: string): SettingDef | undefined {
    return BY_KEY.get(key);
  }

  /** Public and readonly settings, keys sorted (AList's map order), all strings. */
  publicValues(): Record<string, string> {
    const out: Record<string, string> = {};
    for (const d of [...CATALOG].sort((a, b) => a.key.localeCompare(b.key))) {
      if (d.flag === FLAG.PUBLIC || d.flag === FLAG.READONLY) out[d.key] = this.get(d.key);
    }
    return out;
  }

  items(): SettingItem[] {
    return CATALOG.map((d) => ({ ...d, value: this.get(d.key) }));
  }

  /** Validate and store values. Readonly keys cannot be changed. */
  async save(values: Record<string, string>): Promise<void> {
    for (const [k, v] of Object.entries(values)) {
      if (typeof v !== 'string') throw new VfsError('INVALID', `setting ${k}: value must be a string`);
      const d = BY_KEY.get(k);
      if (d?.flag === FLAG.READONLY) throw new VfsError('INVALID', `setting ${k} is read-only`);
      if (d?.type === 'number' && !/^-?\d+(\.\d+)?$/.test(v.trim())) throw new VfsError('INVALID', `setting ${k}: not a number`);
      if (d?.type === 'bool' && v !== 'true' && v !== 'false') throw new VfsError('INVALID', `setting ${k}: must be true or false`);
      if (d?.type === 'json') {
        try {
          JSON.parse(v);
        } catch {
          throw new VfsError('INVALID', `setting ${k}: not valid JSON`);
        }
      }
    }
    await this.store.settings.setMany(values);
    Object.assign(this.values, values);
  }
}

export function newApiToken(): string {
  return `alist-${randomUUID()}${randomBytes(48).toString('base64url').slice(0, 64)}`;
}
