/**
 * Outgoing SSH packets of a connection are carved from one reused arena instead of a new buffer
 * each.
 *
 * ssh2 allocates every outgoing packet (a download is one 32 KiB packet after another), and V8
 * counts that memory as external: every ~64 MB of it starts a full mark of the heap. Measured on a
 * 1 GiB SFTP download: a mark-compact every ~50 ms, about a third of the server's CPU.
 *
 * Safety: a packet's bytes must stay untouched until the socket has handed them to the kernel. The
 * arena is rewound only when the socket holds nothing (`writableLength === 0`: every earlier write
 * completed, none corked or pending in libuv) and ssh2 holds no queued packet; otherwise, or when
 * the arena is full, packets get ordinary buffers, as before.
 *
 * ssh2 has no hook for this: its PacketWriter.alloc calls the cipher's allocPacket, which sizes the
 * packet (padding, MAC) and takes it from Buffer.allocUnsafe. We wrap PacketWriter's alloc and let
 * that one call take from the connection's arena. The internals used are checked when a connection starts (`attach` returns
 * false and changes nothing if they differ). Verified against ssh2 1.17.0 (lib/protocol/zlib.js
 * PacketWriter, crypto.js allocPacket, utils.js sendPacket).
 */
import type { Socket } from 'node:net';
import type { Connection } from 'ssh2';
import { allocatingFrom } from './alloc-from.js';

/** Enough for several 255 KiB DATA replies in one tick (the SFTP server corks a tick's writes). */
const ARENA_BYTES = 4 << 20;
/** Smaller packets come from Node's own 8 KiB pool anyway. */
const MIN_FROM_ARENA = 4096;

interface WriterInternals {
  alloc(payloadSize: number, force?: boolean): Buffer;
  _protocol: ProtocolInternals;
}
interface ProtocolInternals {
  _kexinit: unknown;
  _queue?: unknown[];
  _cipher: { allocPacket(payloadLen: number): Buffer };
  _packetRW: { write: WriterInternals };
}

interface Arena {
  socket: Socket;
  buf: Buffer;
  used: number;
}

/** Arenas by ssh2 Protocol object; connections without one allocate as ssh2 does. */
const arenas = new WeakMap<ProtocolInternals, Arena>();
let patched: WriterInternals | undefined;

function take(a: Arena, n: number): Buffer | undefined {
  if (n < MIN_FROM_ARENA || a.used + n > ARENA_BYTES) return undefined;
  const b = a.buf.subarray(a.used, a.used + n);
  a.used += n;
  return b;
}

/**
 * Wrap PacketWriter.prototype.alloc once: ssh2 makes a new PacketWriter at every key exchange, so
 * the prototype (not an instance) is where every later packet of every connection passes.
 */
function patchWriter(proto: WriterInternals): void {
  if (patched) return;
  patched = proto;
  const original = proto.alloc;
  proto.alloc = function (this: WriterInternals, payloadSize: number, force?: boolean): Buffer {
    const p = this._protocol;
    const a = arenas.get(p);
    // Packets made during a key exchange are queued by ssh2 and sent later: never from the arena.
    if (!a || (p._kexinit !== undefined && !force)) return original.call(this, payloadSize, force);
    if (a.used && a.socket.writableLength === 0 && !p._queue?.length) a.used = 0;
    return allocatingFrom((n) => take(a, n), () => p._cipher.allocPacket(payloadSize));
  };
}

export function attachPacketArena(client: Connection, socket: Socket): boolean {
  const proto = (client as unknown as { _protocol?: ProtocolInternals })._protocol;
  const writer = proto?._packetRW?.write;
  if (!proto || !writer || writer.constructor.name !== 'PacketWriter' || writer._protocol !== proto) return false;
  const prototype = Object.getPrototypeOf(writer) as WriterInternals;
  if (typeof prototype.alloc !== 'function' || typeof proto._cipher?.allocPacket !== 'function') return false;
  patchWriter(prototype);
  arenas.set(proto, { socket, buf: Buffer.allocUnsafeSlow(ARENA_BYTES), used: 0 });
  return true;
}
