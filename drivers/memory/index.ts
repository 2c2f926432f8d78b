/**
 * "Memory": an in-memory storage. It is the reference implementation of every optional Driver method
 * (read it before writing a driver), the test double the core's tests mount, and the backend the
 * protocol loopback tests use. Contents vanish when the storage is dropped or the server stops.
 */
import type { DriverDefinition, OptionSpec } from '../types.js';
import { configFlags } from '../options.js';
import { MemoryDriver } from './memory.js';

const options = [] as const satisfies readonly OptionSpec[];

export const memoryDefinition: DriverDefinition<typeof options> = {
  config: configFlags('Memory', {
    local_sort: true, only_proxy: true, default_root: '',
    alert: 'warning|Memory storage: its files live in RAM and are lost when treegate restarts. Meant for tests and scratch space.',
  }),
  options,
  create: () => new MemoryDriver(),
};
