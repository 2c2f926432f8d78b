/**
 * Meta rule administration for the REST admin routes (alist-compat §13): paths are cleaned to
 * absolute virtual paths, hide text is validated line by line, paths are unique (the store reports
 * EXISTS `UNIQUE constraint failed: x_meta.path`), and every write drops the MetaRules cache.
 */
import { VfsError } from '../errors.js';
import { normalize } from '../paths.js';
import type { Repo } from '../store/store.js';
import type { MetaRecord } from '../store/types.js';
import { MetaRules, RECORD_DEFAULTS, validateHide } from './meta.js';

export type MetaInput = Partial<MetaRecord> & { path: string };

export class MetaService {
  readonly rules: MetaRules;

  constructor(private readonly repo: Repo<MetaRecord>) {
    this.rules = new MetaRules(repo);
  }

  private clean(input: MetaInput, base?: MetaRecord): Omit<MetaRecord, 'id'> {
    if (typeof input.path !== 'string' || input.path.trim() === '') throw new VfsError('INVALID', 'path is required');
    const rec = { ...RECORD_DEFAULTS, ...base, ...input, path: normalize(input.path) };
    validateHide(rec.hide);
    const { id: _id, ...rest } = { ...rec, id: 0 };
    return rest;
  }

  /** All rules ordered by id. */
  list(): Promise<MetaRecord[]> {
    return this.repo.list();
  }

  async get(id: number): Promise<MetaRecord> {
    const m = await this.repo.get(id);
    if (!m) throw new VfsError('NOT_FOUND', 'failed get old meta: record not found');
    return m;
  }

  async create(input: MetaInput): Promise<MetaRecord> {
    const rec = this.clean(input);
    try {
      return await this.repo.insert({ ...rec, id: input.id || undefined });
    } finally {
      this.rules.invalidate();
    }
  }

  async update(input: MetaInput & { id: number }): Promise<MetaRecord> {
    const old = await this.get(input.id);
    const rec = this.clean(input, old);
    try {
      return await this.repo.update(old.id, rec);
    } finally {
      this.rules.invalidate();
    }
  }

  async delete(id: number): Promise<void> {
    await this.repo.delete(id);
    this.rules.invalidate();
  }
}
