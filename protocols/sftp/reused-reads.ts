/**
 * An SSH connection's socket reads land in one buffer of its own, reused for every read, instead of
 * a new buffer per read.
 *
 * Why: Node allocates a fresh buffer for each socket read, and V8 counts that memory as external.
 * A 1 GiB upload was ~17,600 reads, 1 GiB of short-lived buffers, and every ~64 MB of it starts a
 * full mark of the heap. On 2 cores the concurrent markers took a third of the server's CPU and
 * competed with the client (measured with perf; README "SFTP speed").
 *
 * The danger: ssh2 parses a read in place and keeps some views into it after the read is handled.
 * Bytes overwritten under such a view would corrupt the connection or a file. Every view that can
 * outlive a read is made a copy here, at the three places views leave the read:
 *
 *  1. ssh2's transport state (`detach`, after every read): the decipher's packet in progress, the
 *     unparsed part of the client's ident line, the key exchange's copy of the client's KEXINIT
 *     (kept for the rekey OpenSSH does every few GiB) and its DH data. Every own field of those
 *     objects that views the buffer is replaced by a copy, so a field we did not list is covered too.
 *  2. Every message handler except CHANNEL_DATA (`attach`): their arguments are copied when they
 *     view the buffer. That covers what ssh2 queues or hands to asynchronous code, such as the
 *     key, signature and blob of auth requests queued behind one still being decided.
 *  3. CHANNEL_DATA goes to the SFTP parser, which parses each request synchronously; of what it
 *     emits, only a WRITE's data is kept past the call, and SftpSession copies it when `holds`
 *     says it lives here (big WRITEs arrive in several SSH packets and come joined in pool memory
 *     anyway, write-pool.ts).
 *
 * In tests (TREEGATE_DEBUG_POISON_READS=1, set by vitest.config.ts) the buffer is overwritten after
 * every read, so a view that escaped this list corrupts data at once and fails a test instead of
 * hiding.
 *
 * Node has no public way to give an accepted socket a read buffer (`onread` is a client option), so
 * the accepted socket's handle moves to a new Socket built with `onread`. ssh2's internals used:
 * Connection._protocol with _handlers, _decipher, _kex, _buffer (Protocol.js, kex.js, crypto.js of
 * ssh2 1.17.0). Both steps check what they touch and fall back to Node's and ssh2's own behaviour.
 */
import { Socket } from 'node:net';
import type { Connection } from 'ssh2';

/** Bigger reads also mean fewer SSH packets cut in two by a read end (ssh2 copies those). */
export const READ_BUFFER_BYTES = 256 * 1024;

interface ProtocolInternals {
  _handlers?: Record<string, unknown>;
  _decipher?: object;
  _kex?: object;
}

/** Messages whose payload goes straight to a synchronous parser (see 3 above). */
const NOT_COPIED = new Set(['CHANNEL_DATA']);

export class ReusedReads {
  readonly buf = Buffer.allocUnsafeSlow(READ_BUFFER_BYTES);
  /** Set by a successful attach; until then every read is handed over as a copy (Node's behaviour). */
  private proto?: ProtocolInternals;
  private readonly poisoned = process.env.TREEGATE_DEBUG_POISON_READS === '1';

  /** Whether `b` views this connection's read buffer (so it changes at the next read). */
  holds(b: Uint8Array): boolean {
    return b.buffer === this.buf.buffer;
  }

  /** A copy when `b` views the read buffer, else `b` itself. */
  stable<T>(v: T): T {
    if (v instanceof Uint8Array) return (this.holds(v) ? Buffer.from(v) : v) as T;
    if (v && typeof v === 'object' && !Array.isArray(v)) {
      // for-in, not Object.entries: this runs after every read, and allocates nothing this way.
      const o = v as Record<string, unknown>;
      for (const k in o) {
        const x = o[k];
        if (x instanceof Uint8Array && this.holds(x)) o[k] = Buffer.from(x);
      }
    }
    return v;
  }

  /**
   * Route the connection's message handlers through `stable` (2 above) and remember its protocol
   * for `detach`. False, changing nothing, when ssh2's internals differ from what we know.
   */
  attach(client: Connection): boolean {
    const proto = (client as unknown as { _protocol?: ProtocolInternals })._protocol;
    const handlers = proto?._handlers;
    if (!proto || !handlers || typeof handlers !== 'object' || typeof handlers.CHANNEL_DATA !== 'function' || !('_decipher' in proto)) return false;
    for (const [name, fn] of Object.entries(handlers)) {
      if (typeof fn !== 'function' || NOT_COPIED.has(name)) continue;
      // The first argument is the protocol itself, which detach() covers after the read.
      handlers[name] = (self: unknown, ...args: unknown[]) => (fn as (...a: unknown[]) => unknown)(self, ...args.map((a) => this.stable(a)));
    }
    this.proto = proto;
    return true;
  }

  /** After ssh2 parsed a read: copy what its transport keeps of it (1 above). */
  private detach(): void {
    const p = this.proto;
    if (!p) return;
    this.stable(p);
    if (p._decipher) this.stable(p._decipher);
    if (p._kex) this.stable(p._kex);
  }

  /** onread callback: hand the bytes to ssh2 (its 'data' listener), then make the buffer free. */
  deliver(socket: Socket, n: number): void {
    if (!this.proto) {
      socket.emit('data', Buffer.from(this.buf.subarray(0, n)));
      return;
    }
    socket.emit('data', this.buf.subarray(0, n));
    this.detach();
    if (this.poisoned) this.buf.fill(0xa5, 0, n);
  }
}

interface HandleInternals {
  useUserBuffer?: unknown;
  readStart?: unknown;
}

/**
 * Move an accepted socket's connection to a new Socket that reads into a ReusedReads buffer. The
 * accepted socket must come from a server with `pauseOnConnect` (it has not read yet); it is
 * destroyed empty. Returns the accepted socket itself, resumed, when Node's internals differ.
 */
export function withReusedReads(accepted: Socket): { socket: Socket; reads?: ReusedReads } {
  const husk = accepted as unknown as { _handle?: HandleInternals | null };
  const handle = husk._handle;
  if (!handle || typeof handle.useUserBuffer !== 'function' || typeof handle.readStart !== 'function') {
    accepted.resume();
    return { socket: accepted };
  }
  const reads = new ReusedReads();
  husk._handle = null;
  // Without a handle, destroy() only ends the husk's bookkeeping (the server's connection count).
  accepted.destroy();
  const socket: Socket = new Socket({
    handle,
    readable: true,
    writable: true,
    onread: { buffer: reads.buf, callback: (n: number) => void reads.deliver(socket, n) },
  } as ConstructorParameters<typeof Socket>[0]);
  return { socket, reads };
}
