import { Readable } from 'node:stream';
import { VfsError } from '../../src/errors.js';
import { basename, isWithin, join, parent, validateName } from '../../src/paths.js';
import type { CallArgs, Driver, Link, Obj, PutArgs, RemoveArgs } from '../types.js';
import type { templateDefinition } from './index.js';

type Options = Parameters<typeof templateDefinition.create>[0];
interface Item { dir: boolean; data: Buffer; modified: Date }

export class TemplateDriver implements Driver {
  private readonly items = new Map<string, Item>();

  constructor(private readonly opts: Options) {}

  async init(signal: AbortSignal): Promise<void> {
    signal.throwIfAborted(); // a real driver connects and validates its credentials here
    this.items.set('/', { dir: true, data: Buffer.alloc(0), modified: new Date() });
  }

  async drop(): Promise<void> {
    this.items.clear();
  }

  private item(path: string): Item {
    const it = this.items.get(path);
    if (!it) throw new VfsError('NOT_FOUND', undefined, { path });
    return it;
  }

  private obj(path: string, it: Item): Obj {
    return { name: basename(path), path, size: it.data.length, isDir: it.dir, modified: it.modified };
  }

  async get(path: string): Promise<Obj> {
    const p = join(path);
    return this.obj(p, this.item(p));
  }

  async list(dir: Obj): Promise<Obj[]> {
    if (!this.item(dir.path).dir) throw new VfsError('NOT_A_DIR', undefined, { path: dir.path });
    return [...this.items].filter(([p]) => p !== '/' && parent(p) === dir.path).map(([p, it]) => this.obj(p, it));
  }

  async link(file: Obj): Promise<Link> {
    const it = this.item(file.path);
    if (it.dir) throw new VfsError('IS_A_DIR', undefined, { path: file.path });
    return { kind: 'range', size: it.data.length, open: async (r) => Readable.from([it.data.subarray(r?.start ?? 0, r?.end === undefined ? undefined : r.end + 1)]) };
  }

  private child(dir: Obj, name: string): string {
    if (!this.item(dir.path).dir) throw new VfsError('NOT_A_DIR', undefined, { path: dir.path });
    return join(dir.path, validateName(name));
  }

  async mkdir(dir: Obj, name: string): Promise<Obj> {
    const p = this.child(dir, name);
    if (this.items.has(p)) throw new VfsError('EXISTS', undefined, { path: p });
    const it = { dir: true, data: Buffer.alloc(0), modified: new Date() };
    this.items.set(p, it);
    return this.obj(p, it);
  }

  async remove(obj: Obj, args?: RemoveArgs): Promise<void> {
    this.item(obj.path);
    if (args?.onlyEmpty && [...this.items.keys()].some((p) => p !== obj.path && isWithin(obj.path, p))) {
      throw new VfsError('NOT_EMPTY', undefined, { path: obj.path });
    }
    for (const p of [...this.items.keys()]) if (isWithin(obj.path, p)) this.items.delete(p);
  }

  async put(dir: Obj, stream: Readable, args: PutArgs & CallArgs): Promise<Obj> {
    const p = this.child(dir, args.name);
    if (this.items.get(p)?.dir) throw new VfsError('IS_A_DIR', undefined, { path: p });
    const parts: Buffer[] = [];
    let size = 0;
    for await (const c of stream) {
      args.signal?.throwIfAborted();
      size += (c as Buffer).length;
      if (size > this.opts.max_file_size) throw new VfsError('INVALID', `file larger than ${this.opts.max_file_size} bytes`);
      parts.push(c as Buffer);
    }
    args.signal?.throwIfAborted();
    if (args.size !== undefined && args.size !== size) throw new VfsError('INVALID', 'size mismatch');
    if (args.noReplace && this.items.has(p)) throw new VfsError('EXISTS', 'file exists', { path: p });
    const it = { dir: false, data: Buffer.concat(parts), modified: args.modified ?? new Date() };
    this.items.set(p, it); // only complete uploads become visible
    return this.obj(p, it);
  }
}
