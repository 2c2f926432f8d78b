/**
 * Backpressure for WRITE requests. ssh2 takes every packet a client sends and opens the channel's
 * window again at once, so a client that pipelines WRITEs faster than the storage takes them (or out
 * of order, past the reorder budget) made the server hold the whole upload: 1.5 GiB for a 1.5 GiB
 * upload. While the WRITE bytes received and not yet answered exceed LIMIT, the channel's window is
 * left to close (ssh2 skips its window adjust when push() returns false), so the client must wait;
 * it opens again once they fall to half. OpenSSH and rclone keep far less in flight: they never wait.
 * (The ssh2 internals are in openssh-ext.ts.)
 *
 * The channels of the whole server also share a bound (SharedWrites): with LIMIT per channel alone,
 * one user's 64 connections × 16 channels could make the server hold 32 GiB on a storage slower
 * than the network. Past the shared bound every channel that receives more holds its window too,
 * and all of them open again once the total falls to half.
 */
import type { SFTPWrapper } from 'ssh2';
import { canHoldWindow, openWindow } from './openssh-ext.js';

const LIMIT = 32 << 20;
/**
 * Requests of any kind under way on the channel (READs waiting in reply-gate.ts included) past which
 * the window is held too: a READ is 30 bytes on the wire and a waiting one about 1.6 KB of memory, so
 * a client that read the transport but never opened the window for its answers made the server hold
 * 600,000 READs (970 MB of heap) without any byte limit being reached. OpenSSH keeps 64 in flight.
 */
export const MAX_REQUESTS = 1024;

/** WRITE bytes received and not yet answered on all channels together, past which channels wait. */
export const SHARED_LIMIT = 256 << 20;

/** What all channels' gates share (one per server, server.ts). */
export class SharedWrites {
  pending = 0;
  /** Gates holding their window, opened again once `pending` falls to half the limit. */
  readonly held = new Set<WriteGate>();
  constructor(readonly limit = SHARED_LIMIT) {}
}

export class WriteGate {
  private pending = 0;
  private requests = 0;
  private closed = false;
  private gone = false;

  /** Wraps `sftp.push`: call before anything else reads the channel. Without ssh2's internals, no gate. */
  constructor(private readonly sftp: SFTPWrapper, private readonly shared = new SharedWrites()) {
    if (!canHoldWindow(sftp)) return;
    const s = sftp as unknown as { push(data: Buffer | null): unknown };
    const push = s.push;
    s.push = (data: Buffer | null) => {
      const r = push.call(s, data);
      if (this.pending > LIMIT || this.requests > MAX_REQUESTS || this.shared.pending > this.shared.limit) {
        this.closed = true;
        this.shared.held.add(this);
      }
      return this.closed ? false : r;
    };
  }

  /** A request (a WRITE of `n` bytes, 0 for others) arrived; call the returned function once it is answered. */
  taken(n: number): () => void {
    this.pending += n;
    this.shared.pending += n;
    this.requests++;
    let given = false;
    return () => {
      if (given) return;
      given = true;
      this.pending -= n;
      this.shared.pending -= n;
      this.requests--;
      this.openIfRoom();
      if (this.shared.held.size && this.shared.pending <= this.shared.limit / 2) for (const g of this.shared.held) g.openIfRoom();
    };
  }

  /** The channel is gone: it no longer waits for the shared bound. */
  dispose(): void {
    this.gone = true;
    this.shared.held.delete(this);
  }

  private openIfRoom(): void {
    if (!this.closed || this.gone || this.pending > LIMIT / 2 || this.requests > MAX_REQUESTS / 2 || this.shared.pending > this.shared.limit / 2) return;
    this.closed = false;
    this.shared.held.delete(this);
    openWindow(this.sftp);
  }
}
