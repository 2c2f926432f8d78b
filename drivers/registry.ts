/**
 * The list of drivers treegate knows, written out explicitly (no side-effect registration), and the
 * lookups the storage service and the REST driver endpoints need. One registry instance is built by
 * the composition root and passed down; tests may build their own with other definitions.
 */
import type { DriverDefinition } from './types.js';
import { localDefinition } from './local/index.js';
import { memoryDefinition } from './memory/index.js';
import { s3Definition } from './s3/index.js';
import { sftpDefinition } from './sftp/index.js';
import { webdavDefinition } from './webdav/index.js';
import { ftpDefinition } from './ftp/index.js';
import { aliasDefinition } from './alias/index.js';
import { templateOf, type DriverTemplate } from './options.js';

export { parseOptions, additionJson, templateOf, type DriverTemplate, type TemplateItem } from './options.js';

/** Every built-in driver. Add a new driver here (see drivers/template/). */
// Each definition is typed by its own option list; the registry holds them as the common shape.
const erase = (d: unknown) => d as DriverDefinition;

export const BUILTIN_DRIVERS: readonly DriverDefinition[] = [
  erase(localDefinition),
  erase(s3Definition),
  erase(sftpDefinition),
  erase(webdavDefinition),
  erase(ftpDefinition),
  erase(aliasDefinition),
  erase(memoryDefinition),
];

export class DriverRegistry {
  private readonly byName = new Map<string, DriverDefinition>();

  constructor(defs: readonly DriverDefinition[] = BUILTIN_DRIVERS) {
    for (const d of defs) {
      if (this.byName.has(d.config.name)) throw new Error(`duplicate driver name ${d.config.name}`);
      this.byName.set(d.config.name, d);
    }
  }

  /** Driver names in registration order. */
  names(): string[] {
    return [...this.byName.keys()];
  }

  /** The definition, or undefined for an unknown name. */
  get(name: string): DriverDefinition | undefined {
    return this.byName.get(name);
  }

  /** AList's `driver/info` answer for one driver, or undefined (REST answers 404 `driver [X] not found`). */
  template(name: string): DriverTemplate | undefined {
    const d = this.byName.get(name);
    return d && templateOf(d);
  }

  /** AList's `driver/list` answer: an object keyed by driver name. */
  templates(): Record<string, DriverTemplate> {
    const out: Record<string, DriverTemplate> = {};
    for (const [name, d] of this.byName) out[name] = templateOf(d);
    return out;
  }
}
