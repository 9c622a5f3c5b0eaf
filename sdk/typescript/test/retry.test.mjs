// Unit tests of the retry policy: the backoff schedule (doubling, cap,
// jitter range, Retry-After floor) and what is retried. The same cases as
// client/src/retry.rs, so both clients provably share one policy.

import { test } from "node:test";
import assert from "node:assert/strict";
import { DEFAULT_RETRY_POLICY, backoffDelay, isRetryableStatus, parseRetryAfter } from "../dist/index.js";
import { jitter, validatePolicy } from "../dist/retry.js";

const policy = { ...DEFAULT_RETRY_POLICY, maxAttempts: 10, baseDelayMs: 100, maxDelayMs: 2000 };

test("the defaults are the Rust client's", () => {
  assert.deepEqual({ ...DEFAULT_RETRY_POLICY }, {
    maxAttempts: 8,
    baseDelayMs: 100,
    maxDelayMs: 5000,
    totalBudgetMs: 30_000,
    requestTimeoutMs: 10_000,
  });
});

test("the cap doubles per attempt, then stops at maxDelay", () => {
  const caps = [1, 2, 3, 4, 5, 6, 7].map((attempt) => Math.floor(backoffDelay(policy, attempt, 0.9999999)));
  assert.deepEqual(caps, [99, 199, 399, 799, 1599, 1999, 1999]);
  assert.equal(backoffDelay(policy, 1000, 1), 2000, "huge attempt numbers stay at the cap");
  assert.equal(backoffDelay(policy, 0, 1), 100, "attempt 0 is treated as the first");
});

test("full jitter spreads over the whole range [0, cap)", () => {
  assert.equal(backoffDelay(policy, 3, 0), 0);
  assert.equal(backoffDelay(policy, 3, 0.5), 200);
  assert.equal(backoffDelay(policy, 3, 2), 400, "jitter is clamped to 1");
  const samples = Array.from({ length: 1000 }, () => jitter());
  assert.ok(samples.every((j) => j >= 0 && j < 1), "jitter is in [0, 1)");
  assert.ok(samples.some((j) => j < 0.1) && samples.some((j) => j > 0.9), "jitter covers the range");
});

test("Retry-After is a floor, never a cap", () => {
  assert.equal(backoffDelay(policy, 1, 0.1, 1000), 1000);
  assert.equal(backoffDelay(policy, 6, 1, 10), 2000);
  assert.equal(backoffDelay(policy, 1, 0.5, 0), 50, "Retry-After: 0 leaves the backoff alone");
});

test("only 429 and 5xx are retried", () => {
  for (const status of [429, 500, 502, 503, 504]) assert.equal(isRetryableStatus(status), true, String(status));
  for (const status of [200, 301, 400, 401, 403, 404, 405, 409, 413, 415, 422]) {
    assert.equal(isRetryableStatus(status), false, String(status));
  }
});

test("Retry-After is read as delta-seconds or an HTTP-date", () => {
  assert.equal(parseRetryAfter("1"), 1000);
  assert.equal(parseRetryAfter(" 0 "), 0);
  assert.equal(parseRetryAfter(null), undefined);
  assert.equal(parseRetryAfter("soon"), undefined);
  assert.equal(parseRetryAfter("-1"), undefined);
  const now = Date.parse("2026-12-01T09:30:00Z");
  assert.equal(parseRetryAfter("Tue, 01 Dec 2026 09:30:05 GMT", now), 5000);
  assert.equal(parseRetryAfter("Tue, 01 Dec 2026 09:29:00 GMT", now), 0, "a past date means now");
});

test("a nonsensical policy is refused at construction", () => {
  assert.throws(() => validatePolicy({ ...DEFAULT_RETRY_POLICY, maxAttempts: 0 }), RangeError);
  assert.throws(() => validatePolicy({ ...DEFAULT_RETRY_POLICY, maxAttempts: 1.5 }), RangeError);
  assert.throws(() => validatePolicy({ ...DEFAULT_RETRY_POLICY, totalBudgetMs: Number.NaN }), RangeError);
  assert.throws(() => validatePolicy({ ...DEFAULT_RETRY_POLICY, requestTimeoutMs: 0 }), RangeError);
});
