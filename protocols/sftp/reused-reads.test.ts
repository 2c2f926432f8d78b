/**
 * ReusedReads on a real loopback socket, with a stand-in for ssh2's protocol object (only the fields
 * reused-reads.ts touches). The end-to-end proof, with OpenSSH, rekeys and key logins while the
 * buffer is poisoned after every read, is test/sftp.test.ts and test/sftp-session.test.ts.
 */
import { once } from 'node:events';
import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import type { Connection } from 'ssh2';
import { afterEach, describe, expect, it } from 'vitest';
import { ReusedReads, withReusedReads } from './reused-reads.js';

let server: Server | undefined;
afterEach(() => void server?.close());

/** A server whose one connection goes through withReusedReads; resolves with both ends. */
async function pair(): Promise<{ socket: Socket; reads: ReusedReads; client: Socket; server: Server }> {
  const accepted = new Promise<{ socket: Socket; reads?: ReusedReads }>((resolve) => {
    server = createServer({ pauseOnConnect: true }, (s) => resolve(withReusedReads(s)));
  });
  await new Promise<void>((r) => server!.listen(0, '127.0.0.1', r));
  const client = connect((server!.address() as AddressInfo).port, '127.0.0.1');
  const { socket, reads } = await accepted;
  expect(reads).toBeDefined();
  return { socket, reads: reads!, client, server: server! };
}

interface FakeProtocol {
  _handlers: Record<string, (...args: unknown[]) => unknown>;
  _decipher: { _packet: Uint8Array | null };
  _kex?: { _remoteKexinit?: Buffer };
  _buffer?: Buffer;
}

function fakeClient(p: FakeProtocol): Connection {
  return { _protocol: p } as unknown as Connection;
}

describe('withReusedReads', () => {
  it('hands reads over as copies until attached, then in the reused buffer; EOF and close as usual', async () => {
    const { socket, reads, client, server: srv } = await pair();
    const seen: Buffer[] = [];
    const text: string[] = [];
    socket.on('data', (d: Buffer) => (seen.push(d), text.push(d.toString())));
    client.write('before');
    await once(socket, 'data');
    expect(text[0]).toBe('before');
    expect(reads.holds(seen[0]!)).toBe(false);

    const proto: FakeProtocol = { _handlers: { CHANNEL_DATA: () => undefined }, _decipher: { _packet: null } };
    expect(reads.attach(fakeClient(proto))).toBe(true);
    client.write('after');
    await once(socket, 'data');
    expect(text[1]).toBe('after');
    expect(reads.holds(seen[1]!)).toBe(true);
    // Poisoned after the read (vitest.config.ts sets TREEGATE_DEBUG_POISON_READS): a kept view shows it.
    expect(seen[1]!.toString('hex')).toBe('a5'.repeat(5));

    // The accepted socket was only a husk: the server counts no connection, and closes at once.
    const count = await new Promise<number>((r, j) => srv.getConnections((e, n) => (e ? j(e) : r(n))));
    expect(count).toBe(0);
    const ended = once(socket, 'end');
    client.end();
    await ended;
    socket.end();
    await once(socket, 'close');
  });
});

describe('ReusedReads', () => {
  it('copies what the transport keeps of a read (decipher packet, KEXINIT, ident remainder), only those views', async () => {
    const { socket, reads, client } = await pair();
    const own = Buffer.from('not from a read');
    const proto: FakeProtocol = { _handlers: { CHANNEL_DATA: () => undefined }, _decipher: { _packet: null }, _kex: {}, _buffer: undefined };
    reads.attach(fakeClient(proto));
    // Stand-in for ssh2's parse: keep views into the read, as the real decipher and kex do.
    socket.on('data', (d: Buffer) => {
      proto._decipher._packet = new Uint8Array(d.buffer, d.byteOffset, 3);
      proto._kex!._remoteKexinit = d.subarray(3, 6);
      proto._buffer = d.subarray(6);
      (proto as unknown as { _own: Buffer })._own = own;
    });
    client.write('abcdefgh');
    await once(socket, 'data');
    expect(Buffer.from(proto._decipher._packet!).toString()).toBe('abc');
    expect(proto._kex!._remoteKexinit!.toString()).toBe('def');
    expect(proto._buffer!.toString()).toBe('gh');
    for (const b of [proto._decipher._packet!, proto._kex!._remoteKexinit!, proto._buffer!]) expect(reads.holds(b)).toBe(false);
    expect((proto as unknown as { _own: Buffer })._own).toBe(own);
    client.destroy();
    socket.destroy();
  });

  it('gives message handlers copies of their buffer arguments, except CHANNEL_DATA', () => {
    const reads = new ReusedReads();
    reads.buf.write('KEYSIGNDATA');
    const got: Record<string, unknown[]> = {};
    const proto: FakeProtocol = {
      _handlers: {
        USERAUTH_REQUEST: (...a) => (got.auth = a),
        CHANNEL_DATA: (...a) => (got.data = a),
      },
      _decipher: { _packet: null },
    };
    reads.attach(fakeClient(proto));
    const key = reads.buf.subarray(0, 3);
    const signature = reads.buf.subarray(3, 7);
    proto._handlers.USERAUTH_REQUEST!(proto, 'alice', 'ssh-connection', 'publickey', { keyAlgo: 'ssh-ed25519', key, signature });
    proto._handlers.CHANNEL_DATA!(proto, 1, reads.buf.subarray(7, 11));
    const methodData = got.auth![4] as { key: Buffer; signature: Buffer; keyAlgo: string };
    expect(methodData.keyAlgo).toBe('ssh-ed25519');
    expect([methodData.key.toString(), methodData.signature.toString()]).toEqual(['KEY', 'SIGN']);
    expect(reads.holds(methodData.key) || reads.holds(methodData.signature)).toBe(false);
    expect(reads.holds(got.data![2] as Buffer)).toBe(true);
  });

  it('stable() copies only views of the read buffer', () => {
    const reads = new ReusedReads();
    const mine = Buffer.from('x');
    expect(reads.stable(mine)).toBe(mine);
    const view = reads.buf.subarray(0, 4);
    const copy = reads.stable(view);
    expect(copy).not.toBe(view);
    expect(copy.equals(view)).toBe(true);
    expect(reads.holds(copy)).toBe(false);
  });

  it('refuses to attach to a connection whose internals differ, and then keeps copying reads', () => {
    const reads = new ReusedReads();
    expect(reads.attach({} as Connection)).toBe(false);
    expect(reads.attach(fakeClient({ _handlers: {}, _decipher: { _packet: null } }))).toBe(false);
  });
});
