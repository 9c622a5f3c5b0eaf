// The operation table as the tests see it: which operations the SDK must
// cover, and which operation a request (method and path) was.

import { readFileSync } from "node:fs";
import { OPERATIONS } from "../../dist/index.js";

export const SCHEMA_MODULE = new URL("../../src/generated/schema.ts", import.meta.url);

/**
 * Every `/v1` operation called with an API key, and the two probes (not
 * `receiveStripeEvent`: no scope, Stripe calls it).
 */
export function sdkOperationIds() {
  return Object.entries(OPERATIONS)
    .filter(([id, op]) => (op.path.startsWith("/v1/") && op.scopes.length > 0) || id === "getHealthz" || id === "getReadyz")
    .map(([id]) => id)
    .sort();
}

/** `"GET /v1/holds/h1"` → `"getHold"` (undefined if no operation matches). */
export function operationOf(request) {
  const [method, path] = request.split(" ");
  for (const [id, op] of Object.entries(OPERATIONS)) {
    if (op.method !== method) continue;
    const literal = op.path.split(/\{[^}]+\}/).map((part) => part.replace(/[.*+?^$()|[\]\\{}]/g, "\\$&"));
    const pattern = new RegExp(`^${literal.join("[^/]+")}$`);
    if (pattern.test(path)) return id;
  }
  return undefined;
}

export function readCommittedSchemaModule() {
  return readFileSync(SCHEMA_MODULE, "utf8");
}
