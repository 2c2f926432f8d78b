/**
 * A treegate in its own process for the kill -9 test (run with vite-node): starts on the data dir
 * in TREEGATE_DATA with ephemeral ports and prints `PORT <n>` once listening.
 */
import { startServer } from '../src/server.js';

const running = await startServer({ data: process.env.TREEGATE_DATA });
process.stdout.write(`PORT ${running.http.port}\n`);
