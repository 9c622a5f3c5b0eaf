/**
 * Checks made before anything is sent, for callers the type system does
 * not reach (plain JavaScript, `any`, JSON from elsewhere):
 *
 * - a mutation carries its upstream ID: the caller's stable ID for the
 *   operation, which makes every retry a replay. The client never invents one.
 * - money and quantities are decimal strings: a JS number has already lost
 *   precision (`0.1 + 0.2`), so one is refused rather than sent.
 */

import { DECIMAL_FIELD_NAMES } from "./generated/schema.js";
import { describe } from "./url.js";

const DECIMAL_FIELDS: ReadonlySet<string> = new Set(DECIMAL_FIELD_NAMES);

/** Throws unless `body[field]` is a non-empty string. */
export function requireUpstreamId(body: unknown, field: string, operation: string): void {
  if (typeof body !== "object" || body === null) {
    throw new TypeError(`${operation}: the request must be an object, got ${describe(body)}`);
  }
  const value = (body as Record<string, unknown>)[field];
  if (typeof value !== "string" || value === "") {
    throw new TypeError(
      `${operation}: ${field} is required (the upstream system's stable ID for this operation, ` +
        `sent unchanged on every retry), got ${describe(value)}`,
    );
  }
}

/**
 * Throws if any decimal field (`amount`, `quantity`, an overdraft `limit`, …
 * as the OpenAPI document lists them) anywhere in `body` is not a string.
 */
export function requireDecimalStrings(body: unknown, operation: string, path = ""): void {
  if (Array.isArray(body)) {
    body.forEach((item, index) => requireDecimalStrings(item, operation, `${path}[${index}]`));
    return;
  }
  if (typeof body !== "object" || body === null) return;
  for (const [key, value] of Object.entries(body)) {
    const where = path ? `${path}.${key}` : key;
    if (DECIMAL_FIELDS.has(key) && value !== undefined && value !== null && typeof value !== "string") {
      throw new TypeError(
        `${operation}: ${where} must be a decimal string such as "0.0125", got ${describe(value)} ` +
          `(money is never a JS number)`,
      );
    }
    if (key !== "metadata") requireDecimalStrings(value, operation, where);
  }
}
