// Small HTTP servers for the tests: a stub that answers what it is told,
// and a proxy that can lose an answer after the server committed it.

import http from "node:http";

/** Listens on 127.0.0.1 on a free port; resolves with the base URL. */
export function listen(server) {
  return new Promise((resolveUrl, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      resolveUrl(`http://127.0.0.1:${port}`);
    });
  });
}

export function close(server) {
  server.closeAllConnections?.();
  return new Promise((resolveClose) => server.close(() => resolveClose()));
}

function readBody(stream) {
  return new Promise((resolveBody, reject) => {
    const chunks = [];
    stream.on("data", (chunk) => chunks.push(chunk));
    stream.on("end", () => resolveBody(Buffer.concat(chunks)));
    stream.on("error", reject);
  });
}

/**
 * A stub server: `answer(request, count)` returns `{status, headers, body}`
 * (or `null` to never answer). `requests` records each request with the
 * time it arrived.
 */
export async function startStub(answer) {
  const requests = [];
  const server = http.createServer(async (req, res) => {
    const body = (await readBody(req)).toString("utf8");
    requests.push({ method: req.method, url: req.url, headers: req.headers, body, at: performance.now() });
    const reply = answer(req, requests.length);
    if (reply === null) return; // hold the request open: the client's timeout must end it
    res.writeHead(reply.status, reply.headers ?? {});
    res.end(reply.body ?? "");
  });
  const baseUrl = await listen(server);
  return { baseUrl, requests, close: () => close(server) };
}

/** A problem+json answer as tally gives it. */
export function problemReply(status, code, extra = {}, headers = {}) {
  return {
    status,
    headers: { "content-type": "application/problem+json", ...headers },
    body: JSON.stringify({ type: `/problems/${code}`, title: code, status, detail: `stub ${code}`, code, ...extra }),
  };
}

/**
 * A proxy in front of `upstream`. Each request is forwarded and the
 * upstream's answer read in full; `shouldDrop(req, upstreamAnswer)` decides
 * whether the client instead gets its socket destroyed, without a byte of
 * the answer. `log` records what happened to each request.
 */
export async function startLossyProxy(upstream, shouldDrop) {
  const log = [];
  const target = new URL(upstream);
  const server = http.createServer(async (req, res) => {
    const body = await readBody(req);
    const headers = { ...req.headers };
    delete headers.host;
    delete headers.connection;
    const answer = await new Promise((resolveAnswer, reject) => {
      const forward = http.request(
        { host: target.hostname, port: target.port, method: req.method, path: req.url, headers },
        async (upstreamResponse) => {
          resolveAnswer({
            status: upstreamResponse.statusCode,
            headers: upstreamResponse.headers,
            body: await readBody(upstreamResponse),
          });
        },
      );
      forward.on("error", reject);
      forward.end(body);
    });
    const dropped = shouldDrop(req, answer, log.length + 1);
    log.push({ method: req.method, url: req.url, status: answer.status, body: answer.body.toString("utf8"), dropped });
    if (dropped) {
      req.socket.destroy();
      return;
    }
    const out = { ...answer.headers };
    delete out.connection;
    delete out["keep-alive"];
    delete out["transfer-encoding"];
    out["content-length"] = String(answer.body.length);
    res.writeHead(answer.status, out);
    res.end(answer.body);
  });
  const baseUrl = await listen(server);
  return { baseUrl, log, close: () => close(server) };
}
