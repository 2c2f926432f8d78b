#!/usr/bin/env node
/**
 * treegate's command line (contract.md): server, admin show|set|random, version, --help.
 * `admin set`/`random` write the store directly when no server runs; while one owns DATA they hand the
 * change to it (store/owner.ts), so the store keeps one writer. `admin show` only reads.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { resolveDataDir, type ConfigFlags } from './config.js';
import { JsonStore } from './store/json-store.js';
import { claimOwner, OwnerBusyError, submitRequest } from './store/owner.js';
import { Accounts } from './auth/accounts.js';
import { ADMIN_PASSWORD_OP } from './auth/admin-request.js';
import { hashPassword, newSalt, randomPassword } from './auth/passwords.js';
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
  /** -h or --help anywhere (before a `--`): print the help, do nothing else. */
  help: boolean;
  /** The first bad option; reported unless help was asked for. */
  error?: string;
}

function parseArgs(argv: string[]): Parsed {
  const args: string[] = [];
  const flags: ConfigFlags = {};
  let help = false;
  let error: string | undefined;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '--') {
      args.push(...argv.slice(i + 1)); // the rest are arguments (a password starting with -)
      break;
    }
    const [name, inline] = a.startsWith('--') ? a.split(/=(.*)/s, 2) : [a, undefined];
    if (name === '--data' || name === '--config') {
      const v = inline ?? argv[++i];
      if (!v) error ??= `${name} needs a value`;
      else flags[name === '--data' ? 'data' : 'config'] = v;
    } else if (a === '-h' || a === '--help') help = true;
    else if (a.startsWith('--')) error ??= `unknown option ${a}`;
    else args.push(a);
  }
  return { args, flags, help, error };
}

const NO_ADMIN = 'no admin user yet: start the server once (treegate server) to create it';

/**
 * Open the store of an existing data dir (a missing or mistyped one is an error: nothing is created).
 * `readOnly` for `admin show`; otherwise the caller holds DATA's owner claim (store/owner.ts).
 */
async function withAccounts<T>(dataDir: string, readOnly: boolean, fn: (a: Accounts, store: JsonStore) => Promise<T>): Promise<T> {
  const file = join(dataDir, 'store.json');
  if (!existsSync(file)) throw new Error(`no store at ${file}: check --data / TREEGATE_DATA, or start the server once to create it`);
  const store = await JsonStore.open(file, { readOnly });
  try {
    return await fn(new Accounts(store), store);
  } finally {
    await store.close();
  }
}

/** Set the admin password; returns the admin's username. Through the server when one runs on DATA. */
async function setAdminPassword(dataDir: string, pw: string): Promise<string> {
  const file = join(dataDir, 'store.json');
  if (!existsSync(file)) throw new Error(`no store at ${file}: check --data / TREEGATE_DATA, or start the server once to create it`);
  let release: () => Promise<void>;
  try {
    release = await claimOwner(dataDir, 'cli');
  } catch (e) {
    if (!(e instanceof OwnerBusyError)) throw e;
    const salt = newSalt();
    const answer = await submitRequest(dataDir, e.owner, { op: ADMIN_PASSWORD_OP, salt, pwd_hash: await hashPassword(pw, salt) });
    return String(answer.username);
  }
  try {
    return await withAccounts(dataDir, false, async (accounts) => {
      const admin = await accounts.admin();
      if (!admin) throw new Error(NO_ADMIN);
      await accounts.setPassword(admin.id, pw);
      return admin.username;
    });
  } finally {
    await release();
  }
}

async function adminCommand(sub: string | undefined, rest: string[], flags: ConfigFlags): Promise<number> {
  const dataDir = resolveDataDir(flags);
  if (sub === undefined || sub === 'show') {
    return withAccounts(dataDir, true, async (accounts) => {
      const admin = await accounts.admin();
      if (!admin) {
        console.error(NO_ADMIN);
        return 1;
      }
      console.log(`username: ${admin.username}`);
      console.log(`password set: ${admin.pwd_hash ? 'yes' : 'no'}`);
      return 0;
    });
  }
  if (sub === 'set') {
    const pw = rest[0];
    if (!pw) {
      console.error('usage: treegate admin set PASSWORD');
      return 2;
    }
    const username = await setAdminPassword(dataDir, pw);
    console.log(`admin password updated (user ${username}); existing tokens are invalid now`);
    return 0;
  }
  if (sub === 'random') {
    const pw = randomPassword(12);
    const username = await setAdminPassword(dataDir, pw);
    console.log(`username: ${username}`);
    console.log(`password: ${pw}`);
    return 0;
  }
  console.error(`unknown admin command: ${sub}\n\n${HELP}`);
  return 2;
}

async function main(argv: string[]): Promise<number> {
  const { args, flags, help, error } = parseArgs(argv);
  const [cmd, sub, ...rest] = args;
  // Help wins over everything, wherever it is (`treegate server --help`): nothing is started or created.
  if (help || cmd === 'help') {
    console.log(HELP);
    return 0;
  }
  if (error) throw new Error(error);
  if (cmd === undefined) {
    console.log(HELP);
    return 2;
  }
  if (cmd === 'version') {
    console.log(VERSION);
    return 0;
  }
  if (cmd === 'admin' || cmd === 'password') {
    return adminCommand(sub, rest, flags); // never creates DATA, config.json or store.json
  }
  if (cmd === 'server') {
    // `treegate server /srv/treegate` (the --data forgotten) used to ignore the path and serve a new
    // ./data, with a new admin, wherever it was run: an argument the command does not take is refused.
    if (sub !== undefined) {
      console.error(`treegate: server takes no arguments, got ${JSON.stringify(sub)}${sub.includes('/') ? ` (meant --data ${sub}?)` : ''}\n\n${HELP}`);
      return 2;
    }
    // Signals are caught before anything else, the (slow) import of the server included: whoever
    // started us may stop us at any moment, and one that comes during start-up stops the server
    // cleanly once it is up (exit 0) instead of killing it half-started.
    //
    // `on`, not `once`: a signal that comes again while the stop is under way must not kill the
    // process (with `once` the handler is gone and the default action ends it at once: no drained
    // uploads, no flushed store, not even the buffered log lines). Ctrl-C under `npm start` sends
    // exactly that: the terminal signals the whole process group, and npm forwards its own SIGINT
    // to us as well. The stop is bounded (server.ts), so a repeat is simply ignored.
    let early: string | undefined;
    let onSignal = (signal: string) => void (early ??= signal);
    process.on('SIGTERM', () => onSignal('SIGTERM'));
    process.on('SIGINT', () => onSignal('SIGINT'));
    // A hang-up (the terminal or ssh session that ran `treegate server` closed) stops it as cleanly:
    // by default it killed the process mid-upload, with no graceful stop.
    process.on('SIGHUP', () => onSignal('SIGHUP'));
    const { startServer } = await import('./server.js');
    const running = await startServer(flags);
    await new Promise<void>((resolve) => {
      let stopping = false;
      onSignal = (signal: string) => {
        if (stopping) return void running.core.log.info({ signal }, 'already stopping');
        stopping = true;
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
