#!/usr/bin/env node
/**
 * treegate's command line (contract.md): server, admin show|set|random, version, --help.
 * `admin set`/`random` write the store directly; a running server notices the change on disk.
 */
import { join } from 'node:path';
import { resolveDataDir, loadConfig, type ConfigFlags } from './config.js';
import { JsonStore } from './store/json-store.js';
import { Accounts } from './auth/accounts.js';
import { randomPassword } from './auth/passwords.js';
import { VERSION } from './version.js';

const HELP = `treegate ${VERSION}: one virtual tree of storages over REST (AList v3 API), WebDAV and SFTP

Usage:
  treegate server [--data DIR] [--config FILE]   run the gateway (REST + WebDAV on the HTTP port, SFTP on its own)
  treegate admin show [--data DIR]               print the admin's username and whether a password is set
  treegate admin set PASSWORD [--data DIR]       set the admin password (a running server picks it up)
  treegate admin random [--data DIR]             set and print a new random admin password
  treegate version                               print the version
  treegate --help                                this text

Configuration: flag > TREEGATE_* environment > DATA/config.json > built-in defaults.
The data dir is --data, else TREEGATE_DATA, else ./data.`;

interface Parsed {
  args: string[];
  flags: ConfigFlags;
}

function parseArgs(argv: string[]): Parsed {
  const args: string[] = [];
  const flags: ConfigFlags = {};
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    const [name, inline] = a.startsWith('--') ? a.split(/=(.*)/s, 2) : [a, undefined];
    if (name === '--data' || name === '--config') {
      const v = inline ?? argv[++i];
      if (!v) throw new Error(`${name} needs a value`);
      flags[name === '--data' ? 'data' : 'config'] = v;
    } else if (a === '-h' || a === '--help') args.push('--help');
    else if (a.startsWith('--')) throw new Error(`unknown option ${a}`);
    else args.push(a);
  }
  return { args, flags };
}

async function withAccounts<T>(flags: ConfigFlags, fn: (a: Accounts, store: JsonStore) => Promise<T>): Promise<T> {
  const store = await JsonStore.open(join(resolveDataDir(flags), 'store.json'));
  try {
    return await fn(new Accounts(store), store);
  } finally {
    await store.close();
  }
}

async function adminCommand(sub: string | undefined, rest: string[], flags: ConfigFlags): Promise<number> {
  return withAccounts(flags, async (accounts) => {
    const admin = await accounts.admin();
    if (!admin) {
      console.error('no admin user yet: start the server once (treegate server) to create it');
      return 1;
    }
    if (sub === undefined || sub === 'show') {
      console.log(`username: ${admin.username}`);
      console.log(`password set: ${admin.pwd_hash ? 'yes' : 'no'}`);
      return 0;
    }
    if (sub === 'set') {
      const pw = rest[0];
      if (!pw) {
        console.error('usage: treegate admin set PASSWORD');
        return 2;
      }
      await accounts.setPassword(admin.id, pw);
      console.log(`admin password updated (user ${admin.username}); existing tokens are invalid now`);
      return 0;
    }
    if (sub === 'random') {
      const pw = randomPassword(12);
      await accounts.setPassword(admin.id, pw);
      console.log(`username: ${admin.username}`);
      console.log(`password: ${pw}`);
      return 0;
    }
    console.error(`unknown admin command: ${sub}\n\n${HELP}`);
    return 2;
  });
}

async function main(argv: string[]): Promise<number> {
  const { args, flags } = parseArgs(argv);
  const [cmd, sub, ...rest] = args;
  if (cmd === undefined || cmd === '--help' || cmd === 'help') {
    console.log(HELP);
    return cmd === undefined ? 2 : 0;
  }
  if (cmd === 'version') {
    console.log(VERSION);
    return 0;
  }
  if (cmd === 'admin' || cmd === 'password') {
    await loadConfig(flags); // creates DATA and config.json like the server would
    return adminCommand(sub, rest, flags);
  }
  if (cmd === 'server') {
    const { startServer } = await import('./server.js');
    // Signals are caught before the ready line goes out: whoever started us may stop us the moment
    // it reads that line. One that comes during start-up stops the server once it is up.
    let early: string | undefined;
    let onSignal = (signal: string) => void (early ??= signal);
    process.once('SIGTERM', () => onSignal('SIGTERM'));
    process.once('SIGINT', () => onSignal('SIGINT'));
    const running = await startServer(flags);
    await new Promise<void>((resolve) => {
      onSignal = (signal: string) => {
        running.core.log.info({ signal }, 'stopping');
        running.close().then(resolve, (err: unknown) => {
          running.core.log.error({ err }, 'error while stopping');
          resolve();
        });
      };
      if (early) onSignal(early);
    });
    return 0;
  }
  console.error(`unknown command: ${cmd}\n\n${HELP}`);
  return 2;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    console.error(`treegate: ${err instanceof Error ? err.message : String(err)}`);
    process.exit(1);
  },
);
