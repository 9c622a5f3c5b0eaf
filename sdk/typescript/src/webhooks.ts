/**
 * Verifying the server's outbound webhooks (Standard Webhooks,
 * https://www.standardwebhooks.com).
 *
 * Each delivery carries `webhook-id`, `webhook-timestamp` (unix seconds) and
 * `webhook-signature`: space-separated `v1,<base64 HMAC-SHA256>` entries
 * (two while the sender rotates its secret). The HMAC is over the exact
 * bytes `{webhook-id}.{webhook-timestamp}.{raw body}`, keyed with the
 * decoded bytes of the secret (`whsec_` + base64).
 *
 * Verify the raw body as received, before any JSON parsing: re-serialised
 * JSON is not the bytes that were signed.
 */

import { Buffer } from "node:buffer";
import { createHmac, timingSafeEqual } from "node:crypto";

/** How far `webhook-timestamp` may be from now, either way, by default. */
export const DEFAULT_WEBHOOK_TOLERANCE_SECONDS = 300;

const SECRET_PREFIX = "whsec_";
const VERSION = "v1";
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
const TIMESTAMP = /^[0-9]{1,15}$/;

/** A delivery's body: the event. Money inside `data` is a decimal string. */
export interface WebhookEvent {
  /** `evt_…`, also sent as `webhook-id`: deduplicate deliveries by it. */
  readonly id: string;
  /** e.g. `entry.posted`. */
  readonly type: string;
  /** The ledger sequence number the event is about. */
  readonly seq: number;
  /** RFC 3339. */
  readonly created_at: string;
  readonly data: Record<string, unknown>;
}

/** Why a delivery was refused; stable, for logs and metrics. */
export type WebhookVerificationReason =
  | "missing_header"
  | "invalid_timestamp"
  | "timestamp_too_old"
  | "timestamp_too_new"
  | "no_matching_signature"
  | "invalid_payload";

/**
 * The delivery is not proven to come from the sender: answer it with a 4xx
 * (e.g. 400) and do not process it. A malformed secret is a `TypeError`
 * instead (a configuration error, not a bad delivery).
 */
export class WebhookVerificationError extends Error {
  override name = "WebhookVerificationError";
  readonly reason: WebhookVerificationReason;

  constructor(reason: WebhookVerificationReason, message: string) {
    super(message);
    this.reason = reason;
  }
}

/** Headers as `fetch`/`Request` has them, or a plain record (Node's `req.headers`). */
export type WebhookHeaders = Headers | Readonly<Record<string, string | readonly string[] | undefined>>;

export interface VerifyWebhookOptions {
  /** How old, or how far in the future, `webhook-timestamp` may be (default 300). */
  readonly toleranceSeconds?: number;
  /** The current time (default: the clock). */
  readonly now?: Date;
}

function secretKey(secret: string): Buffer {
  if (typeof secret !== "string") throw new TypeError("a webhook secret is a string");
  const encoded = secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret;
  if (encoded === "") throw new TypeError("the webhook secret is empty");
  if (!BASE64.test(encoded)) throw new TypeError("the webhook secret is not whsec_ followed by base64");
  return Buffer.from(encoded, "base64");
}

function secretKeys(secret: string | readonly string[]): Buffer[] {
  const secrets = typeof secret === "string" ? [secret] : [...secret];
  if (secrets.length === 0) throw new TypeError("no webhook secret given");
  return secrets.map(secretKey);
}

function bodyBytes(body: string | Uint8Array): Uint8Array {
  if (typeof body === "string") return Buffer.from(body, "utf8");
  if (body instanceof Uint8Array) return body;
  throw new TypeError("the webhook body is a string or a Uint8Array");
}

function signature(key: Buffer, id: string, timestamp: string, body: Uint8Array): string {
  return createHmac("sha256", key).update(`${id}.${timestamp}.`, "utf8").update(body).digest("base64");
}

function isHeaders(headers: WebhookHeaders): headers is Headers {
  return typeof (headers as { get?: unknown }).get === "function";
}

/** The header's value, whatever the case of its name. */
function header(headers: WebhookHeaders, name: string): string {
  let value: string | readonly string[] | null | undefined;
  if (isHeaders(headers)) {
    value = headers.get(name);
  } else {
    value = Object.prototype.hasOwnProperty.call(headers, name) ? headers[name] : undefined;
    if (value === undefined) {
      for (const key of Object.keys(headers)) {
        if (key.toLowerCase() === name) {
          value = headers[key];
          break;
        }
      }
    }
  }
  // Node gives a repeated header as an array: signatures add up, others must be single.
  if (Array.isArray(value)) {
    value = name === "webhook-signature" || value.length === 1 ? value.join(" ") : undefined;
  }
  if (typeof value !== "string" || value.trim() === "") {
    throw new WebhookVerificationError("missing_header", `the ${name} header is missing`);
  }
  return value.trim();
}

function unixSeconds(value: Date | number, what: string): number {
  const ms = value instanceof Date ? value.getTime() : value * 1000;
  if (!Number.isFinite(ms)) throw new TypeError(`${what} is not a valid time`);
  return Math.floor(ms / 1000);
}

/**
 * The `webhook-signature` header value for a delivery: `v1,<base64>`, one
 * space-separated entry per secret (two secrets make the header of a
 * rotation). For a receiver's own tests.
 */
export function signWebhook(
  id: string,
  timestamp: Date | number,
  body: string | Uint8Array,
  secret: string | readonly string[],
): string {
  const ts = String(unixSeconds(timestamp, "timestamp"));
  const bytes = bodyBytes(body);
  return secretKeys(secret)
    .map((key) => `${VERSION},${signature(key, id, ts, bytes)}`)
    .join(" ");
}

/**
 * Checks a delivery and returns its event (the parsed JSON body).
 *
 * `body` is the raw request body exactly as received (`await request.text()`,
 * or the bytes of `express.raw()`). `headers` is a `Headers` or a plain
 * record; names are matched case-insensitively. `secret` is the endpoint's
 * `whsec_…` secret, or a list of them while you rotate your own: any one
 * matching is enough.
 *
 * Throws {@link WebhookVerificationError} when the delivery is not proven
 * authentic and fresh (missing header, timestamp outside the tolerance, no
 * matching `v1` signature, a payload that is not a JSON object); a
 * malformed secret throws a `TypeError`.
 */
export function verifyWebhook(
  body: string | Uint8Array,
  headers: WebhookHeaders,
  secret: string | readonly string[],
  options: VerifyWebhookOptions = {},
): WebhookEvent {
  const keys = secretKeys(secret);
  const bytes = bodyBytes(body);
  const tolerance = options.toleranceSeconds ?? DEFAULT_WEBHOOK_TOLERANCE_SECONDS;
  if (typeof tolerance !== "number" || !(tolerance >= 0)) {
    throw new TypeError("toleranceSeconds must be a number ≥ 0");
  }

  const id = header(headers, "webhook-id");
  const timestamp = header(headers, "webhook-timestamp");
  const signatures = header(headers, "webhook-signature");

  if (!TIMESTAMP.test(timestamp)) {
    throw new WebhookVerificationError("invalid_timestamp", `webhook-timestamp is not unix seconds: ${JSON.stringify(timestamp)}`);
  }
  const sent = Number(timestamp);
  const now = options.now === undefined ? Date.now() / 1000 : unixSeconds(options.now, "now");
  if (sent < now - tolerance) {
    throw new WebhookVerificationError("timestamp_too_old", "webhook-timestamp is too old (a replay?)");
  }
  if (sent > now + tolerance) {
    throw new WebhookVerificationError("timestamp_too_new", "webhook-timestamp is too far in the future");
  }

  const received: Buffer[] = [];
  for (const entry of signatures.split(/\s+/)) {
    const comma = entry.indexOf(",");
    if (comma > 0 && entry.slice(0, comma) === VERSION && comma < entry.length - 1) {
      received.push(Buffer.from(entry.slice(comma + 1), "utf8"));
    }
  }
  if (received.length === 0) {
    throw new WebhookVerificationError("no_matching_signature", "webhook-signature has no v1 signature");
  }

  let matched = false;
  for (const key of keys) {
    const expected = Buffer.from(signature(key, id, timestamp, bytes), "utf8");
    for (const candidate of received) {
      if (candidate.length === expected.length && timingSafeEqual(candidate, expected)) matched = true;
    }
  }
  if (!matched) {
    throw new WebhookVerificationError("no_matching_signature", "no webhook signature matches the secret");
  }

  let event: unknown;
  try {
    event = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes));
  } catch {
    throw new WebhookVerificationError("invalid_payload", "the signed payload is not JSON");
  }
  if (typeof event !== "object" || event === null || Array.isArray(event)) {
    throw new WebhookVerificationError("invalid_payload", "the signed payload is not a JSON object");
  }
  return event as WebhookEvent;
}
