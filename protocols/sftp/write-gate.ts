/**
 * Backpressure for WRITE requests. ssh2 takes every packet a client sends and opens the channel's
 * window again at once, so a client that pipelines WRITEs faster than the storage takes them (or out
 * of order, past the reorder budget) made the server hold the whole upload: 1.5 GiB for a 1.5 GiB
 * upload. While the WRITE bytes received and not yet answered exceed LIMIT, the channel's window is
 * left to close (ssh2 skips its window adjust when push() returns false), so the client must wait;
 * it opens again once they fall to half. OpenSSH and rclone keep far less in flight: they never wait.
 */
import type { SFTPWrapper } from 'ssh2';

const LIMIT = 32 << 20;
/** ssh2's channel window (Channel.js MAX_WINDOW), which its own adjusts restore. */
const FULL_WINDOW = 2 << 20;

/** ssh2 internals (SFTP.js, server.js CHANNEL_DATA): the same fields its own windowAdjust uses. */
interface Window {
  push(data: Buffer | null): unknown;
  _waitChanDrain?: boolean;
  incoming: { window: number };
  outgoing: { id: number; state: string };
  _protocol: { channelWindowAdjust(id: number, amount: number): void };
}

function supported(s: Partial<Window>): s is Window {
  return typeof s.push === 'function' && typeof s.incoming?.window === 'number' && typeof s._protocol?.channelWindowAdjust === 'function';
}

export class WriteGate {
  private pending = 0;
  private closed = false;
  private readonly ch?: Window;

  /** Wraps `sftp.push`: call before anything else reads the channel. Without ssh2's internals, no gate. */
  constructor(sftp: SFTPWrapper) {
    const s = sftp as unknown as Partial<Window>;
    if (!supported(s)) return;
    this.ch = s;
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
      if (this.closed && this.pending <= LIMIT / 2) this.reopen();
    };
  }

  private reopen(): void {
    const ch = this.ch!;
    this.closed = false;
    ch._waitChanDrain = false;
    const amount = FULL_WINDOW - ch.incoming.window;
    if (amount <= 0 || ch.outgoing.state === 'closed') return;
    ch.incoming.window += amount;
    ch._protocol.channelWindowAdjust(ch.outgoing.id, amount);
  }
}
