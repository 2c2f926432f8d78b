/**
 * Test-only: a TCP proxy on a fixed loopback port that can be switched off (every connection cut
 * and the port closed, so new connections are refused, as when the remote host is down) and on
 * again on the same port (the remote is back). Used to check that storages report clear errors
 * while their remote is unreachable and reconnect by themselves when it returns.
 */
import net from 'node:net';
import { proxyTo } from './process.js';

export interface SwitchProxy {
  readonly port: number;
  down(): Promise<void>;
  up(): Promise<void>;
  close(): Promise<void>;
}

export async function switchProxy(target: number): Promise<SwitchProxy> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer(proxyTo(target, sockets));
  const listen = (port: number) => new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => { server.off('error', reject); resolve(); });
  });
  const down = () => new Promise<void>((r) => {
    if (!server.listening) return r();
    for (const s of sockets) s.destroy();
    server.close(() => r());
  });
  await listen(0);
  const port = (server.address() as net.AddressInfo).port;
  return { port, down, up: () => (server.listening ? Promise.resolve() : listen(port)), close: down };
}
