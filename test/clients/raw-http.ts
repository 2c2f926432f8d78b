/** Test-only: raw bytes to an HTTP server, for requests no HTTP client library will send. */
import { connect } from 'node:net';

/** Write `data` on one connection to `base`'s port and collect everything until the server closes it. */
export function rawExchange(base: string, data: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const sock = connect(Number(new URL(base).port), '127.0.0.1');
    let got = '';
    sock.on('data', (b: Buffer) => (got += b.toString('latin1')));
    sock.on('error', reject);
    sock.on('close', () => resolve(got));
    sock.write(data);
  });
}
