/** The options every REST route plugin receives. */
import type { FastifyPluginAsync } from 'fastify';
import type { Core } from '../../src/core.js';

export interface RouteOptions {
  core: Core;
}

export type RoutePlugin = FastifyPluginAsync<RouteOptions>;
