// A tiny stand-in for `tally serve`'s /console routes, for use before the
// server embeds the console: serves api/console/{index.html,app.js,style.css}
// at /console* (with the server's Content-Security-Policy) and proxies every
// other path to a running tally server.
import http from 'node:http';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
export const CONSOLE_DIR = path.resolve(here, '../../../api/console');

export const CSP = "default-src 'self'; img-src 'self' data: blob:; style-src 'self'; script-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

const ASSETS = {
  '/console/app.js': ['app.js', 'text/javascript; charset=utf-8'],
  '/console/style.css': ['style.css', 'text/css; charset=utf-8'],
};

async function serveConsole(req, res, pathname) {
  const [file, type] = ASSETS[pathname] ?? ['index.html', 'text/html; charset=utf-8'];
  const body = await readFile(path.join(CONSOLE_DIR, file));
  res.writeHead(200, {
    'content-type': type,
    'content-security-policy': CSP,
    'x-content-type-options': 'nosniff',
    'referrer-policy': 'no-referrer',
    'cache-control': 'no-cache',
  });
  res.end(req.method === 'HEAD' ? undefined : body);
}

function proxy(req, res, upstream) {
  const target = new URL(req.url, upstream);
  const headers = { ...req.headers, host: target.host };
  const out = http.request(target, { method: req.method, headers }, (up) => {
    res.writeHead(up.statusCode, up.headers);
    up.pipe(res);
  });
  out.on('error', (e) => { res.writeHead(502, { 'content-type': 'text/plain' }); res.end(`dev proxy: ${e.message}`); });
  req.pipe(out);
}

/** Starts the proxy on 127.0.0.1:<port> (0: any); resolves to { url, close }. */
export function startDevProxy(upstream, port = 0) {
  const server = http.createServer((req, res) => {
    const { pathname } = new URL(req.url, 'http://x');
    if ((req.method === 'GET' || req.method === 'HEAD') && (pathname === '/console' || pathname.startsWith('/console/'))) {
      serveConsole(req, res, pathname).catch((e) => { res.writeHead(500); res.end(String(e)); });
    } else {
      proxy(req, res, upstream);
    }
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => {
      const { port: p } = server.address();
      resolve({ url: `http://127.0.0.1:${p}`, close: () => new Promise((r) => { server.closeAllConnections?.(); server.close(() => r()); }) });
    });
  });
}

// `node helpers/dev-proxy.js http://127.0.0.1:8080 [port]` for manual use.
if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const upstream = process.argv[2] || 'http://127.0.0.1:8080';
  startDevProxy(upstream, Number(process.argv[3] || 8090)).then(({ url }) => {
    console.log(`console dev proxy on ${url}/console -> ${upstream}`);
  });
}
