// Webhook signatures (Standard Webhooks): the reference libraries' test
// vector, rotations on both sides, tampering, the timestamp window, header
// names in any case, money as strings. No server needed.

import { test } from "node:test";
import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import { TallyError, WebhookVerificationError, signWebhook, verifyWebhook } from "../dist/index.js";

// The test vector of the Standard Webhooks reference libraries.
const VECTOR = {
  secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
  id: "msg_p5jXN8AQM9LWM0D4loKWxJek",
  timestamp: 1614265330,
  body: '{"test": 2432232314}',
  signature: "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
};

const secretOf = (bytes) => `whsec_${Buffer.from(bytes).toString("base64")}`;
const SECRET = secretOf(Array.from({ length: 32 }, (_, i) => i));
const OTHER_SECRET = secretOf(Array.from({ length: 32 }, (_, i) => 100 + i));
const NOW = 1_760_000_000;
const at = (seconds) => new Date(seconds * 1000);
const EVENT_ID = "evt_0123456789abcdef";
const EVENT = {
  id: EVENT_ID,
  type: "entry.posted",
  seq: 17,
  created_at: "2025-10-09T08:53:20Z",
  data: { entry: { id: "ent_1", amount: "0.0125", balance_after: "-0.0125" } },
};
const BODY = JSON.stringify(EVENT, null, 1);

function delivery({ body = BODY, secret = SECRET, ts = NOW, id = EVENT_ID } = {}) {
  return { "webhook-id": id, "webhook-timestamp": String(ts), "webhook-signature": signWebhook(id, ts, body, secret) };
}

function rejected(headers, { body = BODY, secret = SECRET, now = at(NOW), ...options } = {}) {
  try {
    verifyWebhook(body, headers, secret, { now, ...options });
  } catch (e) {
    assert.ok(e instanceof WebhookVerificationError, `a WebhookVerificationError, not ${e}`);
    return e.reason;
  }
  assert.fail("the delivery was accepted");
}

test("the reference vector signs and verifies", () => {
  assert.equal(signWebhook(VECTOR.id, VECTOR.timestamp, VECTOR.body, VECTOR.secret), VECTOR.signature);
  const headers = { "webhook-id": VECTOR.id, "webhook-timestamp": String(VECTOR.timestamp), "webhook-signature": VECTOR.signature };
  assert.deepEqual(verifyWebhook(VECTOR.body, headers, VECTOR.secret, { now: at(VECTOR.timestamp) }), { test: 2432232314 });
  // The same bytes as a Uint8Array, a secret without its prefix, 299 s later.
  const bare = VECTOR.secret.slice("whsec_".length);
  const bytes = new TextEncoder().encode(VECTOR.body);
  assert.deepEqual(verifyWebhook(bytes, headers, bare, { now: at(VECTOR.timestamp + 299) }), { test: 2432232314 });
  assert.equal(signWebhook(VECTOR.id, at(VECTOR.timestamp), bytes, bare), VECTOR.signature);
});

test("a valid delivery returns the event, money as decimal strings", () => {
  const event = verifyWebhook(BODY, delivery(), SECRET, { now: at(NOW) });
  assert.deepEqual(event, EVENT);
  assert.equal(event.data.entry.amount, "0.0125");
  assert.equal(typeof event.data.entry.balance_after, "string");
});

test("the sender's rotation: two signatures, either matches", () => {
  const header = signWebhook(EVENT_ID, NOW, BODY, [OTHER_SECRET, SECRET]);
  assert.equal(header.split(" ").length, 2);
  assert.equal(header.split(" ")[1], signWebhook(EVENT_ID, NOW, BODY, SECRET));
  const headers = { ...delivery(), "webhook-signature": header };
  assert.equal(verifyWebhook(BODY, headers, SECRET, { now: at(NOW) }).id, EVENT_ID);
  assert.equal(verifyWebhook(BODY, headers, OTHER_SECRET, { now: at(NOW) }).id, EVENT_ID);
  assert.equal(rejected(headers, { secret: secretOf(Buffer.alloc(32, "x")) }), "no_matching_signature");
});

test("other signature versions are ignored", () => {
  const good = signWebhook(EVENT_ID, NOW, BODY, SECRET);
  const value = good.slice(good.indexOf(",") + 1);
  const headers = { ...delivery(), "webhook-signature": `v1a,${value} v2,${value} ${good}` };
  assert.equal(verifyWebhook(BODY, headers, SECRET, { now: at(NOW) }).id, EVENT_ID);
  // The right bytes under another version prefix are no v1 signature.
  assert.equal(rejected({ ...headers, "webhook-signature": `v1a,${value} v0,${value} ${value}` }), "no_matching_signature");
});

test("the receiver's rotation: a list of secrets", () => {
  const headers = delivery();
  assert.equal(verifyWebhook(BODY, headers, [OTHER_SECRET, SECRET], { now: at(NOW) }).id, EVENT_ID);
  assert.equal(rejected(headers, { secret: [OTHER_SECRET] }), "no_matching_signature");
  assert.throws(() => verifyWebhook(BODY, headers, [], { now: at(NOW) }), TypeError);
});

test("a wrong secret is rejected", () => {
  assert.equal(rejected(delivery(), { secret: OTHER_SECRET }), "no_matching_signature");
});

test("a tampered body is rejected", () => {
  const tampered = BODY.replace('"0.0125"', '"1000.0125"');
  assert.notEqual(tampered, BODY);
  assert.equal(rejected(delivery(), { body: tampered }), "no_matching_signature");
  // Re-serialised JSON is not the signed bytes either.
  assert.equal(rejected(delivery(), { body: JSON.stringify(JSON.parse(BODY)) }), "no_matching_signature");
});

test("a tampered id or timestamp is rejected", () => {
  assert.equal(rejected({ ...delivery(), "webhook-id": "evt_other" }), "no_matching_signature");
  assert.equal(rejected({ ...delivery(), "webhook-timestamp": String(NOW + 1) }), "no_matching_signature");
});

test("a tampered signature is rejected", () => {
  const good = delivery()["webhook-signature"];
  const flipped = `${good.slice(0, -2)}${good.at(-2) === "A" ? "B" : "A"}=`;
  for (const signature of [flipped, "v1,", "v1,ü", `${good}A`, good.slice(0, -1)]) {
    assert.equal(rejected({ ...delivery(), "webhook-signature": signature }), "no_matching_signature", signature);
  }
});

test("stale and future timestamps are rejected", () => {
  assert.equal(rejected(delivery({ ts: NOW - 301 })), "timestamp_too_old");
  assert.equal(rejected(delivery({ ts: NOW + 301 })), "timestamp_too_new");
  // The window is inclusive, 300 s each way by default.
  assert.equal(verifyWebhook(BODY, delivery({ ts: NOW - 300 }), SECRET, { now: at(NOW) }).seq, 17);
  assert.equal(verifyWebhook(BODY, delivery({ ts: NOW + 300 }), SECRET, { now: at(NOW) }).seq, 17);
  const old = delivery({ ts: NOW - 3600 });
  assert.equal(verifyWebhook(BODY, old, SECRET, { now: at(NOW), toleranceSeconds: 3600 }).seq, 17);
  assert.equal(rejected(old, { toleranceSeconds: 3599 }), "timestamp_too_old");
});

test("now defaults to the clock", () => {
  const fresh = Math.floor(Date.now() / 1000);
  assert.equal(verifyWebhook(BODY, delivery({ ts: fresh }), SECRET).seq, 17);
  assert.throws(() => verifyWebhook(BODY, delivery({ ts: fresh - 3600 }), SECRET), WebhookVerificationError);
});

test("a malformed timestamp is rejected", () => {
  for (const value of ["abc", "1614265330.5", "-1614265330", "1e9", "١٢٣", "0x10"]) {
    assert.equal(rejected({ ...delivery(), "webhook-timestamp": value }), "invalid_timestamp", value);
  }
});

test("a missing header is rejected", () => {
  for (const name of ["webhook-id", "webhook-timestamp", "webhook-signature"]) {
    const headers = delivery();
    delete headers[name];
    assert.equal(rejected(headers), "missing_header", name);
    assert.equal(rejected({ ...delivery(), [name]: "" }), "missing_header", name);
    assert.equal(rejected({ ...delivery(), [name]: undefined }), "missing_header", name);
    const fetchHeaders = new Headers(delivery());
    fetchHeaders.delete(name);
    assert.equal(rejected(fetchHeaders), "missing_header", name);
  }
});

test("header names are case-insensitive, in a record or a Headers", () => {
  const headers = delivery();
  const mixed = {
    "Webhook-Id": headers["webhook-id"],
    "WEBHOOK-TIMESTAMP": headers["webhook-timestamp"],
    "Webhook-Signature": headers["webhook-signature"],
    "Content-Type": "application/json",
  };
  assert.equal(verifyWebhook(BODY, mixed, SECRET, { now: at(NOW) }).id, EVENT_ID);
  assert.equal(verifyWebhook(BODY, new Headers(mixed), SECRET, { now: at(NOW) }).id, EVENT_ID);
  // Node's req.headers: a repeated signature header arrives as an array.
  const [first, second] = signWebhook(EVENT_ID, NOW, BODY, [OTHER_SECRET, SECRET]).split(" ");
  const node = { ...headers, "webhook-signature": [first, second] };
  assert.equal(verifyWebhook(BODY, node, SECRET, { now: at(NOW) }).id, EVENT_ID);
  assert.equal(rejected({ ...headers, "webhook-id": [EVENT_ID, "evt_other"] }), "missing_header");
});

test("the error is an Error with a reason, not an API error", () => {
  const error = new WebhookVerificationError("missing_header", "x");
  assert.ok(error instanceof Error);
  assert.ok(!(error instanceof TallyError));
  assert.equal(error.name, "WebhookVerificationError");
  assert.equal(error.reason, "missing_header");
});

test("a payload that is not a JSON object is rejected", () => {
  for (const body of ["[1, 2]", "not json", "null", new Uint8Array([0xff, 0xfe, 0x7b, 0x7d])]) {
    assert.equal(rejected(delivery({ body }), { body }), "invalid_payload", String(body));
  }
});

test("a malformed secret is a configuration error (TypeError)", () => {
  for (const secret of ["whsec_not base64!", "whsec_", "", "whsec_abc"]) {
    assert.throws(() => verifyWebhook(BODY, delivery(), secret, { now: at(NOW) }), TypeError, secret);
    assert.throws(() => signWebhook(EVENT_ID, NOW, BODY, secret), TypeError, secret);
  }
});
