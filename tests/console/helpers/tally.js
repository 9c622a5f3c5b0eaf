// Starts a real `tally serve` on a fresh database (SQLite by default,
// PostgreSQL when TALLY_TEST_POSTGRES_URL is set), creates API keys, and
// decides where the console is served: by tally itself when GET /console
// answers 200, otherwise by the dev proxy (helpers/dev-proxy.js).
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { startDevProxy } from './dev-proxy.js';

const here = path.dirname(fileURLToPath(import.meta.url));
export const TALLY_BIN = path.resolve(path.join(here, '..'), process.env.TALLY_BIN || '../../target/debug/tally');

function freshDatabase(dir) {
  const pg = process.env.TALLY_TEST_POSTGRES_URL;
  if (!pg) return { url: `sqlite://${dir}/t.db`, drop() {} };
  const name = `tally_console_${randomBytes(6).toString('hex')}`;
  execFileSync('psql', [pg, '-v', 'ON_ERROR_STOP=1', '-q', '-c', `CREATE DATABASE ${name}`], { stdio: 'pipe' });
  const u = new URL(pg);
  u.pathname = `/${name}`;
  return {
    url: u.toString(),
    drop() {
      try { execFileSync('psql', [pg, '-q', '-c', `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`], { stdio: 'pipe' }); } catch { /* best effort */ }
    },
  };
}

function createKey(dbUrl, scopes) {
  return execFileSync(TALLY_BIN, ['keys', 'create', '--database-url', dbUrl, '--tenant', 'acme', '--scopes', scopes], { encoding: 'utf8' }).trim();
}

/**
 * Resolves to { base, apiBase, viaProxy, keys: { admin, read, post }, logs(), stop() }.
 * `base` is the origin the browser uses (tally itself, or the dev proxy).
 */
export async function startTally() {
  const dir = mkdtempSync(path.join(tmpdir(), 'tally-console-'));
  const db = freshDatabase(dir);
  const seedFile = path.join(dir, 'signing.seed');
  execFileSync(TALLY_BIN, ['signing-key', 'generate', '--seed-file', seedFile], { stdio: 'pipe' });
  // The database (and its migrations) is created by the first command.
  const keys = {
    admin: createKey(db.url, 'post,read,audit,admin'),
    read: createKey(db.url, 'read'),
    post: createKey(db.url, 'post'),
  };
  const child = spawn(TALLY_BIN, ['serve', '--database-url', db.url, '--listen', '127.0.0.1:0', '--signing-key-file', seedFile], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, RUST_LOG: process.env.RUST_LOG || 'info' },
  });
  let stdout = '';
  let stderr = '';
  child.stderr.on('data', (d) => { stderr += d; });
  const apiBase = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`tally serve did not start:\n${stderr}`)), 30_000);
    child.stdout.on('data', (d) => {
      stdout += d;
      const m = /tally listening on (http:\/\/\S+)/.exec(stdout);
      if (m) { clearTimeout(timer); resolve(m[1]); }
    });
    child.once('exit', (code) => { clearTimeout(timer); reject(new Error(`tally serve exited with ${code}:\n${stderr}`)); });
  });
  const consoleStatus = (await fetch(`${apiBase}/console`)).status;
  let proxy = null;
  if (consoleStatus !== 200 || process.env.CONSOLE_DEV_PROXY === '1') proxy = await startDevProxy(apiBase);
  return {
    base: proxy ? proxy.url : apiBase,
    apiBase,
    viaProxy: Boolean(proxy),
    keys,
    logs: () => ({ stdout, stderr }),
    async stop() {
      if (proxy) await proxy.close();
      if (child.exitCode === null) {
        const exited = new Promise((r) => child.once('exit', r));
        child.kill('SIGTERM');
        await Promise.race([exited, new Promise((r) => setTimeout(r, 5000))]);
        if (child.exitCode === null) child.kill('SIGKILL');
      }
      db.drop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A small JSON client for seeding and for comparing the page with the API. */
export function client(apiBase, key) {
  return async function call(method, p, body) {
    const res = await fetch(`${apiBase}${p}`, {
      method,
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', accept: 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    let json = null;
    try { json = text ? JSON.parse(text) : null; } catch { json = text; }
    return { status: res.status, body: json };
  };
}
