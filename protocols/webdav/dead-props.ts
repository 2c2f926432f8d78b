/**
 * Dead properties (PROPPATCH), kept in memory and written through to the store's KV namespace
 * `webdav.props` (key: virtual path; value: the resource's property list), so they survive a restart.
 * They follow their resource on MOVE and COPY and vanish with it on DELETE.
 *
 * They are bounded, per resource and in all: they live in the store, which is written whole on every
 * change, so a user sending PROPPATCH after PROPPATCH must not grow it without end. Past a bound,
 * PROPPATCH answers 507 Insufficient Storage (RFC 4918 §9.2.1); Windows and macOS set a few hundred
 * bytes per file.
 */
import { VfsError } from '../../src/errors.js';
import { isWithin, relativeTo, join } from '../../src/paths.js';
import type { KvRepo } from '../../src/store/store.js';

export const PROPS_NS = 'webdav.props';

export interface DeadProp {
  ns: string;
  local: string;
  /** The value as self-contained XML content (see xml.ts serializeContent). */
  xml: string;
  /**
   * The xml:lang in scope at the property element (its own, or an ancestor's in the PROPPATCH), which
   * RFC 4918 §4.3 says a server MUST keep with a dead property; undefined when there was none.
   */
  lang?: string;
}

export type PropOp = { op: 'set'; prop: DeadProp } | { op: 'remove'; ns: string; local: string };

/** Characters of dead properties (names and values) one resource may carry. */
export const MAX_RESOURCE_CHARS = 64 * 1024;
/** Characters of dead properties all resources together may carry (paths and JSON counted: weightOf). */
export const MAX_TOTAL_CHARS = 8 * 1024 * 1024;

const charsOf = (props: readonly DeadProp[]) => props.reduce((n, p) => n + p.ns.length + p.local.length + p.xml.length + (p.lang?.length ?? 0), 0);
/**
 * What a resource's list weighs in the store: its properties, plus its path (the key) and the JSON
 * around each entry, so many resources with long paths and tiny properties count too.
 */
const weightOf = (vpath: string, props: readonly DeadProp[]) => (props.length ? vpath.length + 32 + charsOf(props) + 32 * props.length : 0);

/** One string per property name: a local name holds no space, so the first space ends it. */
export const keyOf = (ns: string, local: string) => `${local} ${ns}`;

export class DeadProps {
  private readonly map = new Map<string, DeadProp[]>();
  private loading?: Promise<void>;
  /** weightOf every resource's list, kept up to date by write(). */
  private total = 0;

  /** `mountPaths`: every storage's mount path (storages mounted inside a tree are not part of it: subtree). */
  constructor(
    private readonly kv: KvRepo,
    private readonly mountPaths: () => readonly string[] = () => [],
  ) {}

  ready(): Promise<void> {
    return (this.loading ??= (async () => {
      for (const [vpath, props] of await this.kv.entries<DeadProp[]>(PROPS_NS)) {
        this.map.set(vpath, props);
        this.total += weightOf(vpath, props);
      }
    })());
  }

  /** True when no resource has a dead property (PROPFIND's fast path). */
  get empty(): boolean {
    return this.map.size === 0;
  }

  get(vpath: string): readonly DeadProp[] {
    return this.map.get(vpath) ?? [];
  }

  /** Apply operations in document order, all or nothing (the caller has validated them). */
  async apply(vpath: string, ops: PropOp[]): Promise<void> {
    await this.ready();
    // Keyed by name, so a 1 MiB PROPPATCH of tens of thousands of names stays linear (a scan per
    // operation blocked the event loop for seconds). A Map keeps the order: replaced in place, new last.
    const byName = new Map(this.get(vpath).map((p) => [keyOf(p.ns, p.local), p]));
    for (const o of ops) {
      if (o.op === 'set') byName.set(keyOf(o.prop.ns, o.prop.local), o.prop);
      else byName.delete(keyOf(o.ns, o.local));
    }
    const next = [...byName.values()];
    const chars = charsOf(next);
    if (chars > MAX_RESOURCE_CHARS || this.total - weightOf(vpath, this.get(vpath)) + weightOf(vpath, next) > MAX_TOTAL_CHARS) {
      throw new VfsError('NO_SPACE', 'no room for more dead properties', { path: vpath });
    }
    await this.write(vpath, next);
  }

  async copyTree(src: string, dst: string): Promise<void> {
    await this.ready();
    const copies = this.checkCopy(src, dst);
    await this.removeTree(dst);
    for (const [p, props] of copies) await this.write(p, [...props]);
  }

  /**
   * The properties a copy of `src` to `dst` adds, or NO_SPACE (507) when they do not fit. A copy
   * counts toward MAX_TOTAL_CHARS as a PROPPATCH does: unchecked, each COPY of a folder doubled its
   * properties (8 MiB of them became 16, then 32: kv.jsonl grew without end). Past the bound nothing
   * is copied; a copy that adds nothing (the same one again) always passes. COPY asks before it copies
   * the resources: asked only afterwards, it answered 507 for a copy it had made. `deep` false: the
   * properties of `src` itself (a COPY with Depth 0).
   */
  checkCopy(src: string, dst: string, deep = true): Array<readonly [string, DeadProp[]]> {
    const from = deep ? this.subtree(src) : this.map.has(src) ? [[src, this.map.get(src)!] as [string, DeadProp[]]] : [];
    const copies = from.filter(([p]) => !isWithin(dst, p)).map(([p, props]) => [join(dst, relativeTo(src, p)!), props] as const);
    const freed = this.subtree(dst).reduce((n, [p, props]) => n + weightOf(p, props), 0);
    const added = copies.reduce((n, [p, props]) => n + weightOf(p, props), 0);
    if (added > freed && this.total - freed + added > MAX_TOTAL_CHARS) throw new VfsError('NO_SPACE', 'no room for more dead properties', { path: dst });
    return copies;
  }

  async moveTree(src: string, dst: string): Promise<void> {
    await this.ready();
    const moving = this.subtree(src);
    await this.removeTree(dst);
    for (const [p] of moving) await this.write(p, []);
    for (const [p, props] of moving) await this.write(join(dst, relativeTo(src, p)!), props);
  }

  async removeTree(vpath: string): Promise<void> {
    await this.ready();
    for (const [p] of this.subtree(vpath)) await this.write(p, []);
  }

  /** Drop the properties at or below `vpath`, except those below a path in `keep` (a storage still mounted there). */
  async removeTreeExcept(vpath: string, keep: readonly string[]): Promise<void> {
    await this.ready();
    for (const [p] of this.subtree(vpath)) if (!keep.some((k) => isWithin(k, p))) await this.write(p, []);
  }

  private subtree(vpath: string): Array<[string, DeadProp[]]> {
    if (this.map.size === 0) return [];
    // A storage mounted below `vpath` stays where it is when the folder holding its mount point is
    // deleted, moved or copied (the VFS leaves it alone): its files lost their properties to a
    // DELETE or MOVE of that folder, and a COPY put them on files that are not there.
    const inner = this.mountPaths().filter((m) => m !== vpath && isWithin(vpath, m));
    return [...this.map].filter(([p]) => isWithin(vpath, p) && !inner.some((m) => isWithin(m, p)));
  }

  private async write(vpath: string, props: DeadProp[]): Promise<void> {
    this.total += weightOf(vpath, props) - weightOf(vpath, this.get(vpath));
    if (props.length === 0) {
      if (this.map.delete(vpath)) await this.kv.delete(PROPS_NS, vpath);
      return;
    }
    this.map.set(vpath, props);
    await this.kv.set(PROPS_NS, vpath, props);
  }
}
