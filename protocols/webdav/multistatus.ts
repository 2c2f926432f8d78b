/**
 * A 207 Multi-Status body written as a stream: responses are appended as strings and flushed in
 * ~64 KiB chunks, waiting for the socket to drain, so a 10,000-entry listing never sits in memory
 * as one document. A body that stays small is sent with a Content-Length instead of chunked.
 */
import type { ServerResponse } from 'node:http';
import { XML_HEAD } from './xml.js';

const FLUSH_AT = 64 * 1024;
const HEAD = `${XML_HEAD}<D:multistatus xmlns:D="DAV:">`;
const TAIL = '</D:multistatus>';

export const STATUS_LINE: Record<number, string> = {
  200: 'HTTP/1.1 200 OK',
  403: 'HTTP/1.1 403 Forbidden',
  404: 'HTTP/1.1 404 Not Found',
  409: 'HTTP/1.1 409 Conflict',
  423: 'HTTP/1.1 423 Locked',
  424: 'HTTP/1.1 424 Failed Dependency',
};

export function statusLine(code: number): string {
  return STATUS_LINE[code] ?? `HTTP/1.1 ${code} Status`;
}

/** `<D:propstat>` for a set of already-rendered property elements. */
export function propstat(props: string, code: number): string {
  return `<D:propstat><D:prop>${props}</D:prop><D:status>${statusLine(code)}</D:status></D:propstat>`;
}

export class MultiStatus {
  private parts: string[] = [];
  private size = 0;
  private started = false;

  constructor(private readonly res: ServerResponse) {}

  /** Append one `<D:response>` (already rendered). Await it: it may wait for the client to read. */
  async add(response: string): Promise<void> {
    this.parts.push(response);
    this.size += response.length;
    if (this.size >= FLUSH_AT) await this.flush();
  }

  async end(): Promise<void> {
    const rest = this.parts.join('') + TAIL;
    this.parts = [];
    if (!this.started) {
      const body = HEAD + rest;
      this.res.writeHead(207, { 'Content-Type': 'application/xml; charset=utf-8', 'Content-Length': Buffer.byteLength(body) });
      this.res.end(body);
      return;
    }
    this.res.end(rest);
  }

  private async flush(): Promise<void> {
    let chunk = this.parts.join('');
    this.parts = [];
    this.size = 0;
    if (!this.started) {
      this.started = true;
      this.res.writeHead(207, { 'Content-Type': 'application/xml; charset=utf-8' });
      chunk = HEAD + chunk;
    }
    if (this.res.destroyed) throw new Error('client went away');
    if (!this.res.write(chunk)) {
      await new Promise<void>((resolve) => {
        const done = () => {
          this.res.off('drain', done);
          this.res.off('close', done);
          resolve();
        };
        this.res.on('drain', done);
        this.res.on('close', done);
      });
    }
  }
}
