/**
 * What ssh2's SFTP server cannot do through its public API, done here in one place:
 *
 *  1. Advertise extensions in the VERSION packet. ssh2 answers INIT with a fixed 9-byte VERSION, so
 *     clients never learn about `limits@openssh.com` and fall back to 32 KiB reads/writes (the biggest
 *     single cost of SFTP throughput). We answer INIT ourselves, before ssh2 sees it.
 *  2. Send EXTENDED_REPLY packets (statvfs, limits): ssh2 has no server method for them.
 *  3. Send exit-status on the SFTP channel: ssh2's SFTP object (unlike Channel) has no exit(), and
 *     OpenSSH's scp (SFTP mode) reports failure without one.
 *  4. Send DATA replies framed straight from the read buffer: ssh2's data() first copies the
 *     whole reply (up to 255 KiB) into one new buffer, and the allocation churn (GC was ~1/3 of the
 *     server's CPU on downloads) costs more than the copy.
 *  5. Hold the channel's window closed and open it again (write-gate.ts): ssh2 opens it after every
 *     packet, so a client could pipeline WRITEs without bound.
 *
 * Both write raw packets on the channel the way ssh2's own (private) sendOrBuffer does. The private
 * fields used are listed in `Internals`; `supported()` checks them at runtime, so an ssh2 upgrade that
 * renames them degrades to plain ssh2 behaviour (no extensions, statvfs/limits → OP_UNSUPPORTED)
 * instead of breaking sessions. Verified against ssh2 1.17.0 (lib/protocol/SFTP.js).
 */
import type { SFTPWrapper } from 'ssh2';

/** ssh2 internals touched here (SFTP.js: constructor, sendOrBuffer/tryWritePayload). */
interface Internals {
  _version: number;
  _extensions: Record<string, string>;
  _buffer: Buffer[];
  _waitWindow: boolean;
  /** Set (to ssh2's drainBuffer) while the channel waits for window; _buffer is sent when it opens. */
  _chunkcb?: unknown;
  outgoing: { id: number; state: string; window: number; packetSize: number };
  incoming: { window: number };
  /** Set by ssh2 (server.js CHANNEL_DATA) when push() returned false: it then skips its window adjust. */
  _waitChanDrain?: boolean;
  _protocol: { channelData(id: number, data: Buffer): void; exitStatus(id: number, code: number): void; channelWindowAdjust(id: number, amount: number): void };
  push(data: Buffer | null): void;
}

const SSH_FXP_INIT = 1;
const SSH_FXP_VERSION = 2;
const SSH_FXP_DATA = 103;
const SSH_FXP_EXTENDED_REPLY = 201;

/** OpenSSH's SFTP_MAX_MSG_LENGTH, also the largest packet ssh2 accepts (its _maxInPktLen). */
export const MAX_PACKET = 256 * 1024;
/** 255 KiB: leaves room for the WRITE/DATA header inside MAX_PACKET (OpenSSH uses the same). */
export const MAX_RW = MAX_PACKET - 1024;

function internals(sftp: SFTPWrapper): Internals {
  return sftp as unknown as Internals;
}

export function supported(sftp: SFTPWrapper): boolean {
  const s = internals(sftp) as Partial<Internals>;
  return (
    typeof s._version === 'number' &&
    Array.isArray(s._buffer) &&
    typeof s.outgoing?.window === 'number' &&
    typeof s.outgoing.packetSize === 'number' &&
    typeof s._protocol?.channelData === 'function' &&
    typeof s.push === 'function'
  );
}

function packet(type: number, body: Buffer[]): Buffer {
  const len = 1 + body.reduce((n, b) => n + b.length, 0);
  const head = Buffer.alloc(5);
  head.writeUInt32BE(len, 0);
  head[4] = type;
  return Buffer.concat([head, ...body]);
}

function sshString(s: string): Buffer {
  const b = Buffer.from(s, 'utf8');
  const l = Buffer.alloc(4);
  l.writeUInt32BE(b.length, 0);
  return Buffer.concat([l, b]);
}

function u32(n: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n >>> 0, 0);
  return b;
}

export function u64(n: number): Buffer {
  const b = Buffer.alloc(8);
  b.writeBigUInt64BE(BigInt(Math.max(0, Math.floor(n))), 0);
  return b;
}

/**
 * Send a whole packet now if ssh2's fast path would (channel open, nothing queued, window and packet
 * size large enough). Our packets are ~100 bytes, so otherwise we just wait for that state.
 */
function trySend(sftp: SFTPWrapper, pkt: Buffer): 'sent' | 'wait' | 'closed' {
  const s = internals(sftp);
  const out = s.outgoing;
  if (out.state !== 'open') return 'closed';
  if (s._buffer.length || s._waitWindow || out.window < pkt.length || out.packetSize < pkt.length) return 'wait';
  out.window -= pkt.length;
  s._protocol.channelData(out.id, pkt);
  return 'sent';
}

function sendWhenPossible(sftp: SFTPWrapper, pkt: Buffer, tries = 0): void {
  const r = trySend(sftp, pkt);
  // Bounded: 2,000 × 5 ms = 10 s of a stalled window; after that the client is gone or hung anyway.
  if (r === 'wait' && tries < 2000) setTimeout(() => sendWhenPossible(sftp, pkt, tries + 1), 5).unref();
}

/**
 * DATA reply carrying `data`, cut into channel packets of the peer's max packet size the way ssh2's
 * tryWritePayload does, but without first joining header and data into one new buffer: only the
 * packet where the 13-byte header meets the data is copied (channelData copies each piece into its
 * own SSH packet anyway). Only when ssh2's fast path would
 * send at once (nothing queued, window for the whole reply), or, when ssh2 is already waiting for
 * window with its drain armed, by queueing the pieces behind what it holds (its drain frames any
 * buffer list), so ordering and flow control stay ssh2's. Returns false otherwise (the window is
 * short but not exhausted, or internals differ): the caller uses sftp.data().
 */
export function trySendData(sftp: SFTPWrapper, reqId: number, data: Buffer): boolean {
  if (!supported(sftp)) return false;
  const s = internals(sftp);
  const out = s.outgoing;
  if (out.state !== 'open') return false;
  const head = Buffer.allocUnsafe(13);
  const total = data.length;
  head.writeUInt32BE(9 + total, 0);
  head[4] = SSH_FXP_DATA;
  head.writeUInt32BE(reqId >>> 0, 5);
  head.writeUInt32BE(total, 9);
  if (s._waitWindow && typeof s._chunkcb === 'function') {
    // A copy: the caller reuses its buffer as soon as this returns.
    s._buffer.push(head, Buffer.from(data));
    return true;
  }
  if (s._buffer.length || s._waitWindow || out.window < head.length + total || out.packetSize < 64) return false;
  out.window -= head.length + total;
  const segs = [head, data];
  let i = 0;
  let off = 0;
  for (let left = head.length + total; left > 0; ) {
    const n = Math.min(left, out.packetSize);
    left -= n;
    if (segs[i]!.length - off >= n) {
      s._protocol.channelData(out.id, segs[i]!.subarray(off, off + n));
      off += n;
    } else {
      const pkt = Buffer.allocUnsafe(n);
      for (let p = 0; p < n; ) {
        const take = Math.min(n - p, segs[i]!.length - off);
        segs[i]!.copy(pkt, p, off, off + take);
        p += take;
        off += take;
        if (off === segs[i]!.length) (i++, (off = 0));
      }
      s._protocol.channelData(out.id, pkt);
    }
    if (i < segs.length && off === segs[i]!.length) (i++, (off = 0));
  }
  return true;
}

/** Bytes of replies ssh2 holds for this channel until the client opens its window (0 when internals differ). */
export function queuedBytes(sftp: SFTPWrapper): number {
  if (!supported(sftp)) return 0;
  let n = 0;
  for (const b of internals(sftp)._buffer) n += b.length;
  return n;
}

/** ssh2's channel window (Channel.js MAX_WINDOW), which its own adjusts restore. */
const FULL_WINDOW = 2 << 20;

/** Whether the window can be held closed (push() returning false) and opened with openWindow(). */
export function canHoldWindow(sftp: SFTPWrapper): boolean {
  const s = internals(sftp) as Partial<Internals>;
  return supported(sftp) && typeof s.incoming?.window === 'number' && typeof s._protocol?.channelWindowAdjust === 'function';
}

/** Open a window left closed by push() returning false, as ssh2's windowAdjust does for a Channel. */
export function openWindow(sftp: SFTPWrapper): void {
  const s = internals(sftp);
  s._waitChanDrain = false;
  const amount = FULL_WINDOW - s.incoming.window;
  if (amount <= 0 || s.outgoing.state === 'closed') return;
  s.incoming.window += amount;
  s._protocol.channelWindowAdjust(s.outgoing.id, amount);
}

/** Answer an EXTENDED request with an EXTENDED_REPLY carrying `body`. */
export function sendExtendedReply(sftp: SFTPWrapper, reqId: number, body: Buffer[]): void {
  sendWhenPossible(sftp, packet(SSH_FXP_EXTENDED_REPLY, [u32(reqId), ...body]));
}

/** limits@openssh.com reply: max packet, max read, max write, max open handles (all uint64). */
export function limitsReply(maxHandles: number): Buffer[] {
  return [u64(MAX_PACKET), u64(MAX_RW), u64(MAX_RW), u64(maxHandles)];
}

/**
 * Take over the INIT/VERSION exchange so VERSION lists `extensions`. Call right after accept(),
 * before any channel data arrives. Falls back to ssh2's own INIT handling when anything is unusual.
 */
export function advertiseExtensions(sftp: SFTPWrapper, extensions: Record<string, string>): void {
  if (!supported(sftp)) return;
  const s = internals(sftp);
  const original = s.push;
  let pending = Buffer.alloc(0);
  const giveBack = (data: Buffer | null) => {
    s.push = original;
    if (pending.length) original.call(s, pending);
    if (data === null) original.call(s, null);
  };
  s.push = (data: Buffer | null) => {
    if (data === null || s._version !== -1) return giveBack(data);
    pending = Buffer.concat([pending, data]);
    if (pending.length < 9) return;
    const len = pending.readUInt32BE(0);
    if (pending.length < 4 + len) return;
    if (pending[4] !== SSH_FXP_INIT || len < 5) return giveBack(null);
    const version = pending.readUInt32BE(5);
    const reply = packet(SSH_FXP_VERSION, [u32(3), ...Object.entries(extensions).flatMap(([k, v]) => [sshString(k), sshString(v)])]);
    if (trySend(sftp, reply) !== 'sent') return giveBack(null);
    // What ssh2's INIT handler would have set (client extensions are irrelevant to a server).
    s._version = version;
    s._extensions = {};
    const rest = pending.subarray(4 + len);
    pending = Buffer.alloc(0);
    s.push = original;
    sftp.emit('ready');
    if (rest.length) original.call(s, rest);
  };
}

/** exit-status on the SFTP channel, before closing it (what Channel.exit() does for other channels). */
export function sendExitStatus(sftp: SFTPWrapper, code: number): void {
  const s = internals(sftp) as Partial<Internals>;
  if (s.outgoing?.state !== 'open' || typeof s._protocol?.exitStatus !== 'function') return;
  s._protocol.exitStatus(s.outgoing.id, code);
}
