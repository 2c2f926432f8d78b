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

export class WriteGate {
  private pending = 0;
  private closed = false;

  /** Wraps `sftp.push`: call before anything else reads the channel. Without ssh2's internals, no gate. */
  constructor(private readonly sftp: SFTPWrapper) {
    if (!canHoldWindow(sftp)) return;
    const s = sftp as unknown as { push(data: Buffer | null): unknown };
    const push = s.push;
    s.push = (data: Buffer | null) => {
      const r = push.call(s, data);
      if (this.pending > LIMIT) this.closed = true;
      return this.closed ? false : r;
    };
  }

  /** A WRITE of `n` bytes arrived; call the returned function once it is answered. */
  taken(n: number): () => void {
    this.pending += n;
    let given = false;
    return () => {
      if (given) return;
      given = true;
      this.pending -= n;
      if (this.closed && this.pending <= LIMIT / 2) {
        this.closed = false;
        openWindow(this.sftp);
      }
    };
  }
}
