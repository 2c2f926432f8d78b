/**
 * Backpressure for READ replies. ssh2 queues every reply the client's channel window does not take,
 * and keeps reading requests meanwhile, so a client sending READs and never reading the answers made
 * the server hold them all (2,000 READs, 80 KB sent, held 430 MiB). A READ waits here until the
 * replies queued for its channel, plus the READs being served, fit LIMIT.
 */
import type { SFTPWrapper } from 'ssh2';
import { queuedBytes } from './openssh-ext.js';

/** OpenSSH keeps 64 reads of 255 KiB in flight, so a client that reads its replies never waits. */
const LIMIT = 16 << 20;
const POLL_MS = 5;

export class ReplyGate {
  /** Bytes of READs being served, not queued yet. */
  private sending = 0;
  private draining?: Promise<void>;
  private closed = false;

  constructor(private readonly sftp: SFTPWrapper) {}

  /** Wait for room, reserve `length` bytes; call the returned function once the reply is queued. */
  async room(length: number): Promise<() => void> {
    while (this.full()) await this.drained();
    this.sending += length;
    return () => void (this.sending -= length);
  }

  /** The channel is gone: waiting READs go on (and answer nothing). */
  close(): void {
    this.closed = true;
  }

  private full(): boolean {
    return !this.closed && queuedBytes(this.sftp) + this.sending > LIMIT;
  }

  /** One poll per channel while it waits for the client to take its replies. */
  private drained(): Promise<void> {
    return (this.draining ??= new Promise<void>((resolve) => {
      const check = () => {
        if (this.full()) return void setTimeout(check, POLL_MS).unref();
        this.draining = undefined;
        resolve();
      };
      setTimeout(check, POLL_MS).unref();
    }));
  }
}
