/**
 * Backpressure for WRITE requests. ssh2 takes every packet a client sends and opens the channel's
 * window again at once, so a client that pipelines WRITEs faster than the storage takes them (or out
 * of order, past the reorder budget) made the server hold the whole upload: 1.5 GiB for a 1.5 GiB
 * upload. While the WRITE bytes received and not yet answered exceed LIMIT, the channel's window is
 * left to close (ssh2 skips its window adjust when push() returns false), so the client must wait;
 * it opens again once they fall to half. OpenSSH and rclone keep far less in flight: they never wait.
 * (The ssh2 internals are in openssh-ext.ts.)
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

export class WriteGate {
  private pending = 0;
  private requests = 0;
  private closed = false;

  /** Wraps `sftp.push`: call before anything else reads the channel. Without ssh2's internals, no gate. */
  constructor(private readonly sftp: SFTPWrapper) {
    if (!canHoldWindow(sftp)) return;
    const s = sftp as unknown as { push(data: Buffer | null): unknown };
    const push = s.push;
    s.push = (data: Buffer | null) => {
      const r = push.call(s, data);
      if (this.pending > LIMIT || this.requests > MAX_REQUESTS) this.closed = true;
      return this.closed ? false : r;
    };
  }

  /** A request (a WRITE of `n` bytes, 0 for others) arrived; call the returned function once it is answered. */
  taken(n: number): () => void {
    this.pending += n;
    this.requests++;
    let given = false;
    return () => {
      if (given) return;
      given = true;
      this.pending -= n;
      this.requests--;
      if (this.closed && this.pending <= LIMIT / 2 && this.requests <= MAX_REQUESTS / 2) {
        this.closed = false;
        openWindow(this.sftp);
      }
    };
  }
}
