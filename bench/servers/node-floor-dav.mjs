#!/usr/bin/env node
/**
 * The floor for a WebDAV server written on node:http (a benchmark reference, never a product part):
 * the least work any Node server must do for bench/webdav.mjs's cases, with no auth, no VFS, no
 * rules, no locks. GET streams the file in 1 MiB reads (treegate's chunk size); PUT streams the body
 * to a temp file and renames it into place, small bodies written synchronously as treegate does;
 * MKCOL makes a folder; PROPFIND lists a folder as a minimal multistatus (names and sizes only).
 * It shows how much of a gap to nginx (C, sendfile) is Node's own, and how much is treegate's.
 * (In bench/servers/, which `npm run bench` does not run: it is started by bench/webdav.mjs.)
 *
 *   node bench/servers/node-floor-dav.mjs ROOT PORT
 */
import { closeSync, createReadStream, createWriteStream, fstatSync, lstatSync, mkdirSync, openSync, readdirSync, renameSync, statSync, writeSync } from 'node:fs';
import http from 'node:http';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';

const [root, port] = process.argv.slice(2);
let seq = 0;

http
  .createServer(async (req, res) => {
    const path = join(root, decodeURIComponent(new URL(req.url, 'http://x').pathname));
    try {
      if (req.method === 'GET') {
        const st = statSync(path);
        res.writeHead(200, { 'Content-Length': st.size });
        await pipeline(createReadStream(path, { highWaterMark: 1 << 20 }), res);
      } else if (req.method === 'PUT') {
        const temp = join(path, '..', `.floor-${process.pid}-${seq++}`);
        const size = Number(req.headers['content-length']);
        if (size <= 64 * 1024) {
          const chunks = [];
          for await (const c of req) chunks.push(c);
          const fd = openSync(temp, 'wx');
          for (const c of chunks) writeSync(fd, c);
          fstatSync(fd);
          closeSync(fd);
        } else {
          await pipeline(req, createWriteStream(temp, { flags: 'wx', highWaterMark: 1 << 20 }));
        }
        renameSync(temp, path);
        res.writeHead(201, { 'Content-Length': 0 }).end();
      } else if (req.method === 'MKCOL') {
        mkdirSync(path, { recursive: true });
        res.writeHead(201, { 'Content-Length': 0 }).end();
      } else if (req.method === 'PROPFIND') {
        req.resume();
        res.writeHead(207, { 'Content-Type': 'application/xml; charset=utf-8' });
        res.write('<?xml version="1.0" encoding="utf-8"?><D:multistatus xmlns:D="DAV:">');
        let out = '';
        for (const name of readdirSync(path)) {
          const st = lstatSync(join(path, name));
          out += `<D:response><D:href>${encodeURIComponent(name)}</D:href><D:propstat><D:prop><D:getcontentlength>${st.size}</D:getcontentlength><D:getlastmodified>${st.mtime.toUTCString()}</D:getlastmodified></D:prop><D:status>HTTP/1.1 200 OK</D:status></D:propstat></D:response>`;
          if (out.length > 64 * 1024) (res.write(out), (out = ''));
        }
        res.end(out + '</D:multistatus>');
      } else {
        res.writeHead(405, { 'Content-Length': 0 }).end();
      }
    } catch (e) {
      if (!res.headersSent) res.writeHead(500, { 'Content-Length': 0 }).end();
      else res.destroy();
    }
  })
  .listen(Number(port), '127.0.0.1');
