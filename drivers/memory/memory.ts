import { Readable } from 'node:stream';
import { VfsError } from '../../src/errors.js';
import { isWithin, join, segments, validateName } from '../../src/paths.js';
import type { ByteRange, CallArgs, Driver, Link, Obj, PutArgs, RemoveArgs } from '../types.js';

interface FileNode { kind: 'file'; data: Buffer; modified: Date; created: Date }
interface DirNode { kind: 'dir'; children: Map<string, Node>; modified: Date; created: Date }
type Node = FileNode | DirNode;

const newDir = (): DirNode => ({ kind: 'dir', children: new Map(), modified: new Date(), created: new Date() });

/** A folder whose entries changed gets a new mtime, as on a POSIX file system (sync clients compare it). */
const touch = (d: DirNode) => void (d.modified = new Date());

function aborted(signal?: AbortSignal): void {
  if (signal?.aborted) throw new VfsError('UPSTREAM', 'operation aborted', { cause: signal.reason });
}

/** Byte-wise name order, like Local, so listings are stable across drivers. */
const byName = (a: string, b: string) => Buffer.compare(Buffer.from(a), Buffer.from(b));

export class MemoryDriver implements Driver {
  private root: DirNode = newDir();

  async init(signal: AbortSignal): Promise<void> {
    aborted(signal);
  }

  async drop(): Promise<void> {
    this.root = newDir();
  }

  private node(path: string): Node {
    let cur: Node = this.root;
    for (const s of segments(path)) {
      if (cur.kind !== 'dir') throw new VfsError('NOT_A_DIR', undefined, { path });
      const next: Node | undefined = cur.children.get(s);
      if (!next) throw new VfsError('NOT_FOUND', undefined, { path });
      cur = next;
    }
    return cur;
  }

  private dir(path: string): DirNode {
    const n = this.node(path);
    if (n.kind !== 'dir') throw new VfsError('NOT_A_DIR', undefined, { path });
    return n;
  }

  private obj(path: string, n: Node): Obj {
    const s = segments(path);
    return {
      name: s.length ? s[s.length - 1]! : '',
      path: '/' + s.join('/'),
      size: n.kind === 'file' ? n.data.length : 0,
      isDir: n.kind === 'dir',
      modified: n.modified,
      created: n.created,
    };
  }

  private parentAndName(path: string): [DirNode, string] {
    const s = segments(path);
    const name = s.pop();
    if (name === undefined) throw new VfsError('INVALID', 'the root has no parent', { path });
    return [this.dir('/' + s.join('/')), name];
  }

  async get(path: string): Promise<Obj> {
    return this.obj(path, this.node(path));
  }

  async list(dir: Obj): Promise<Obj[]> {
    const d = this.dir(dir.path);
    return [...d.children.keys()].sort(byName).map((name) => this.obj(join(dir.path, name), d.children.get(name)!));
  }

  async link(file: Obj): Promise<Link> {
    const n = this.node(file.path);
    if (n.kind !== 'file') throw new VfsError('IS_A_DIR', undefined, { path: file.path });
    const data = n.data; // a snapshot: a later put replaces the buffer, it never mutates it
    return {
      kind: 'range',
      size: data.length,
      open: async (range?: ByteRange) => {
        const start = range?.start ?? 0;
        const end = range?.end === undefined ? data.length - 1 : Math.min(range.end, data.length - 1);
        return Readable.from(end >= start ? [data.subarray(start, end + 1)] : [], { objectMode: false });
      },
    };
  }

  async mkdir(parent: Obj, name: string, args: CallArgs): Promise<Obj> {
    aborted(args.signal);
    const d = this.dir(parent.path);
    validateName(name);
    if (d.children.has(name)) throw new VfsError('EXISTS', undefined, { path: join(parent.path, name) });
    const n = newDir();
    d.children.set(name, n);
    touch(d);
    return this.obj(join(parent.path, name), n);
  }

  async rename(obj: Obj, newName: string): Promise<Obj> {
    validateName(newName);
    const [d, name] = this.parentAndName(obj.path);
    const n = d.children.get(name);
    if (!n) throw new VfsError('NOT_FOUND', undefined, { path: obj.path });
    if (newName === name) return this.obj(obj.path, n);
    if (d.children.has(newName)) throw new VfsError('EXISTS', undefined, { path: newName });
    d.children.delete(name);
    d.children.set(newName, n);
    touch(d);
    return this.obj(join(parentOf(obj.path), newName), n);
  }

  private transfer(obj: Obj, dstDir: Obj, keepSource: boolean): Obj {
    const [src, name] = this.parentAndName(obj.path);
    const n = src.children.get(name);
    if (!n) throw new VfsError('NOT_FOUND', undefined, { path: obj.path });
    const dst = this.dir(dstDir.path);
    if (n.kind === 'dir' && isWithin(obj.path, dstDir.path)) {
      throw new VfsError('INVALID', 'the destination folder is a subfolder of the source folder');
    }
    if (dst.children.has(name)) throw new VfsError('EXISTS', undefined, { path: join(dstDir.path, name) });
    const moved = keepSource ? clone(n) : n;
    if (!keepSource) {
      src.children.delete(name);
      touch(src);
    }
    dst.children.set(name, moved);
    touch(dst);
    return this.obj(join(dstDir.path, name), moved);
  }

  async move(obj: Obj, dstDir: Obj): Promise<Obj> {
    return this.transfer(obj, dstDir, false);
  }

  async copy(obj: Obj, dstDir: Obj): Promise<Obj> {
    return this.transfer(obj, dstDir, true);
  }

  async remove(obj: Obj, args?: RemoveArgs): Promise<void> {
    const [d, name] = this.parentAndName(obj.path);
    const node = d.children.get(name);
    if (args?.onlyEmpty && node?.kind === 'dir' && node.children.size) throw new VfsError('NOT_EMPTY', undefined, { path: obj.path });
    if (!d.children.delete(name)) throw new VfsError('NOT_FOUND', undefined, { path: obj.path });
    touch(d);
  }

  async put(dstDir: Obj, stream: Readable, args: PutArgs): Promise<Obj> {
    validateName(args.name);
    if (this.dir(dstDir.path).children.get(args.name)?.kind === 'dir') {
      throw new VfsError('IS_A_DIR', undefined, { path: join(dstDir.path, args.name) });
    }
    const chunks: Buffer[] = [];
    let n = 0;
    for await (const chunk of stream) {
      aborted(args.signal);
      const b = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as Uint8Array);
      chunks.push(b);
      n += b.length;
      args.onProgress?.(n);
    }
    aborted(args.signal);
    if (args.size !== undefined && n !== args.size) {
      throw new VfsError('INVALID', `size mismatch: expected ${args.size} bytes, got ${n}`);
    }
    // Only now, with every byte received, does the name appear: an aborted put leaves nothing.
    const d = this.dir(dstDir.path);
    const existing = d.children.get(args.name);
    if (existing?.kind === 'dir') throw new VfsError('IS_A_DIR', undefined, { path: join(dstDir.path, args.name) });
    if (existing && args.noReplace) throw new VfsError('EXISTS', 'file exists', { path: join(dstDir.path, args.name) });
    const node: FileNode = { kind: 'file', data: Buffer.concat(chunks, n), modified: args.modified ?? new Date(), created: existing?.created ?? new Date() };
    d.children.set(args.name, node);
    touch(d);
    return this.obj(join(dstDir.path, args.name), node);
  }

  async setModified(obj: Obj, modified: Date): Promise<void> {
    this.node(obj.path).modified = modified;
  }

  async usage(): Promise<{ used: number }> {
    const total = (n: Node): number => (n.kind === 'file' ? n.data.length : [...n.children.values()].reduce((a, c) => a + total(c), 0));
    return { used: total(this.root) };
  }
}

function parentOf(path: string): string {
  return '/' + segments(path).slice(0, -1).join('/');
}

function clone(n: Node): Node {
  if (n.kind === 'file') return { ...n };
  return { ...n, children: new Map([...n.children].map(([k, v]) => [k, clone(v)])) };
}
