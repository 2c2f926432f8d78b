import { createHash, randomBytes } from 'node:crypto';
import { createRequire } from 'node:module';
import { createServer, type AddressInfo, type Socket } from 'node:net';
import ssh2 from 'ssh2';
import { afterAll, describe, expect, it } from 'vitest';
import { attachPacketArena } from './packet-arena.js';

const { Client, Server, utils } = ssh2;
// More than the 4 MiB arena, so it is rewound and refilled many times.
const DATA = randomBytes(24 << 20);
const sockets: Socket[] = [];
afterAll(() => sockets.forEach((s) => s.destroy()));

/** An ssh2 server whose connections use the arena; an exec request answers DATA on the channel. */
async function serve(): Promise<{ port: number; attached: boolean[]; close(): void }> {
  const key = utils.generateKeyPairSync('ed25519').private;
  const attached: boolean[] = [];
  const ssh = new Server({ hostKeys: [key] }, (client) => {
    client.on('authentication', (ctx) => ctx.accept());
    client.on('session', (accept) => {
      accept().on('exec', (acc) => {
        const ch = acc();
        const socket = sockets[sockets.length - 1]!;
        let off = 0;
        const pump = () => {
          // Corked for the tick, as the SFTP server does: packets pile up unsent in the socket, so
          // an arena rewound too early would overwrite them before they go out.
          socket.cork();
          process.nextTick(() => socket.uncork());
          while (off < DATA.length) {
            const piece = DATA.subarray(off, (off += 100_000));
            if (!ch.write(piece)) return void ch.once('drain', pump);
          }
          ch.exit(0);
          ch.end();
        };
        pump();
      });
    });
  });
  const tcp = createServer((socket) => {
    sockets.push(socket);
    ssh.injectSocket(socket);
    // injectSocket emits 'connection' synchronously: the newest client is this socket's.
  });
  ssh.on('connection', (client) => attached.push(attachPacketArena(client, sockets[sockets.length - 1]!)));
  await new Promise<void>((r) => tcp.listen(0, '127.0.0.1', r));
  return { port: (tcp.address() as AddressInfo).port, attached, close: () => tcp.close() };
}

describe('ssh2 as installed', () => {
  it('has its native crypto binding (built by npm ci; without it downloads run at ~0.6x)', () => {
    const crypto = createRequire(import.meta.url)('ssh2/lib/protocol/crypto.js') as { bindingAvailable: boolean };
    expect(crypto.bindingAvailable).toBe(true);
  });
});

describe('packet arena', () => {
  it('attaches to ssh2 connections and every byte arrives intact', async () => {
    const srv = await serve();
    const got = await new Promise<Buffer>((resolve, reject) => {
      const c = new Client();
      c.on('ready', () =>
        c.exec('send', (err, stream) => {
          if (err) return reject(err);
          const chunks: Buffer[] = [];
          stream.on('data', (b: Buffer) => chunks.push(b));
          stream.on('close', () => {
            c.end();
            resolve(Buffer.concat(chunks));
          });
        }),
      );
      c.on('error', reject);
      c.connect({ host: '127.0.0.1', port: srv.port, username: 'u', password: 'p', algorithms: { cipher: ['aes128-gcm@openssh.com'] } });
    });
    srv.close();
    expect(srv.attached).toEqual([true]);
    expect(got.length).toBe(DATA.length);
    expect(createHash('sha256').update(got).digest('hex')).toBe(createHash('sha256').update(DATA).digest('hex'));
  });
});
