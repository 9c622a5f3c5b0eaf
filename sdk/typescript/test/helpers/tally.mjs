// Starts real `tally serve` processes for the tests: SQLite in a temp dir,
// and PostgreSQL (a fresh database per server, dropped afterwards) when
// TALLY_TEST_POSTGRES_URL is set. The binary is $TALLY_BIN, else
// <repo>/target/debug/tally.

import { spawn, execFile } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { randomBytes } from "node:crypto";
import { describe, before, after } from "node:test";

const run = promisify(execFile);
const REPO = resolve(dirname(fileURLToPath(import.meta.url)), "../../../..");
const FALLBACK_BIN = join(REPO, "target/debug/tally");

/** The tally binary, or a clear error. */
export function tallyBinary() {
  const fromEnv = process.env.TALLY_BIN;
  if (fromEnv) {
    if (!existsSync(fromEnv)) throw new Error(`TALLY_BIN=${fromEnv} does not exist`);
    return fromEnv;
  }
  if (existsSync(FALLBACK_BIN)) return FALLBACK_BIN;
  throw new Error(
    `no tally binary: set TALLY_BIN to a built tally (e.g. cargo build -p tally-api --bin tally), ` +
      `or build ${FALLBACK_BIN}`,
  );
}

let skipNoticeShown = false;

/** The engines to run on: SQLite, and PostgreSQL when configured. */
export function engines() {
  const list = [{ name: "sqlite" }];
  const url = process.env.TALLY_TEST_POSTGRES_URL?.trim();
  if (url) {
    list.push({ name: "postgres", adminUrl: url });
  } else if (process.env.TALLY_REQUIRE_POSTGRES === "1") {
    throw new Error("TALLY_REQUIRE_POSTGRES=1 but TALLY_TEST_POSTGRES_URL is not set: PostgreSQL tests must run, not skip");
  } else if (!skipNoticeShown) {
    skipNoticeShown = true;
    process.stderr.write(
      "\n*** PostgreSQL tests SKIPPED: set TALLY_TEST_POSTGRES_URL=postgres://postgres@127.0.0.1:5432/test to run them ***\n\n",
    );
  }
  return list;
}

/**
 * `describe` once per engine, with a fresh server for the block:
 * `forEachEngine("title", { serveArgs }, (server) => { it(...) })`, where
 * `server()` returns the running {@link TallyServer}.
 */
export function forEachEngine(title, options, body) {
  for (const engine of engines()) {
    describe(`${title} [${engine.name}]`, () => {
      let server;
      before(async () => {
        server = await startTally(engine, options);
      });
      after(async () => {
        await server?.stop();
      });
      body(() => server, engine);
    });
  }
}

/** A fresh database of `engine`: its URL and how to remove it. */
async function freshDatabase(engine, dir) {
  if (engine.name === "sqlite") {
    return { url: `sqlite://${join(dir, "tally.db")}`, drop: async () => {} };
  }
  const name = `tally_sdk_${process.pid}_${randomBytes(4).toString("hex")}`;
  await psql(engine.adminUrl, `CREATE DATABASE ${name}`);
  const url = new URL(engine.adminUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    drop: () => psql(engine.adminUrl, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`),
  };
}

async function psql(adminUrl, sql) {
  try {
    await run("psql", [adminUrl, "-v", "ON_ERROR_STOP=1", "-q", "-c", sql]);
  } catch (error) {
    throw new Error(`psql ${JSON.stringify(sql)} failed: ${error.stderr || error.message}`);
  }
}

/**
 * Starts `tally serve` on a fresh database, on a free port (`--listen
 * 127.0.0.1:0`; the server prints the address it bound), and waits until
 * `/healthz` answers 200.
 */
export async function startTally(engine, { serveArgs = [] } = {}) {
  const bin = tallyBinary();
  const dir = mkdtempSync(join(tmpdir(), "tally-sdk-"));
  const database = await freshDatabase(engine, dir);
  const env = { ...process.env, TALLY_LOG: process.env.TALLY_LOG ?? "warn" };
  delete env.TALLY_DATABASE_URL;
  delete env.TALLY_LISTEN;
  delete env.TALLY_CONFIG;
  const child = spawn(bin, ["serve", "--database-url", database.url, "--listen", "127.0.0.1:0", ...serveArgs], {
    env,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stderr = "";
  child.stderr.on("data", (chunk) => {
    stderr = (stderr + chunk).slice(-8000);
  });
  const cleanup = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((resolveExit) => child.once("exit", resolveExit));
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), 5000);
      await exited;
      clearTimeout(timer);
    }
    await database.drop();
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    const baseUrl = await listeningAddress(child, () => stderr);
    await waitHealthy(baseUrl);
    return {
      engine: engine.name,
      baseUrl,
      databaseUrl: database.url,
      /** A new API key of `tenant` (by default a tenant of its own). */
      async createKey({ tenant = `t_${randomBytes(6).toString("hex")}`, scopes = "post,read,audit,admin" } = {}) {
        const { stdout } = await run(bin, ["keys", "create", "--database-url", database.url, "--tenant", tenant, "--scopes", scopes], { env });
        return { tenant, apiKey: stdout.trim() };
      },
      stop: cleanup,
    };
  } catch (error) {
    await cleanup();
    throw error;
  }
}

/** Reads `tally listening on http://…` from the server's stdout. */
function listeningAddress(child, stderr) {
  return new Promise((resolveAddress, reject) => {
    let stdout = "";
    const timer = setTimeout(() => fail(new Error("tally serve did not report its address within 30 s")), 30_000);
    const fail = (error) => {
      clearTimeout(timer);
      reject(new Error(`${error.message}\n--- stderr ---\n${stderr()}`));
    };
    child.stdout.on("data", (chunk) => {
      stdout += chunk;
      const match = /listening on (http:\/\/\S+)/.exec(stdout);
      if (match) {
        clearTimeout(timer);
        resolveAddress(match[1]);
      }
    });
    child.once("exit", (code, signal) => fail(new Error(`tally serve exited (${code ?? signal}) before listening`)));
    child.once("error", fail);
  });
}

async function waitHealthy(baseUrl) {
  const deadline = Date.now() + 30_000;
  let last = "";
  while (Date.now() < deadline) {
    try {
      const response = await fetch(`${baseUrl}/healthz`);
      if (response.status === 200) return;
      last = `HTTP ${response.status}`;
    } catch (error) {
      last = error.message;
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`${baseUrl}/healthz did not answer 200 within 30 s (${last})`);
}

/** A unique upstream ID for one test. */
export function uid(prefix) {
  return `${prefix}_${randomBytes(6).toString("hex")}`;
}
