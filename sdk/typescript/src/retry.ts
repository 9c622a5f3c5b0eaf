/**
 * When to retry and how long to wait: the policy of the Rust client
 * (client/src/retry.rs), copied exactly.
 *
 * - Retried: connection errors, timeouts, 429 and every 5xx.
 * - Final: every other answer (4xx: 409 conflict, 422 validation or stored
 *   rejection, 401, 403, 404, 413, …).
 * - The wait after failed attempt `n` (1-based) is full jitter over
 *   `min(maxDelay, base × 2^(n−1))`, never shorter than the server's
 *   `Retry-After`.
 * - At most `maxAttempts` attempts (the first included); no retry starts
 *   if it would begin after `totalBudgetMs` since the first attempt.
 */

/** Bounds on retrying. All durations are in milliseconds. */
export interface RetryPolicy {
  /** Most attempts, the first included. */
  readonly maxAttempts: number;
  /** First backoff cap; doubles per attempt. */
  readonly baseDelayMs: number;
  /** Largest backoff cap. */
  readonly maxDelayMs: number;
  /** No retry starts after this much time since the first attempt. */
  readonly totalBudgetMs: number;
  /** Timeout of one attempt (connect, headers and body). */
  readonly requestTimeoutMs: number;
}

export const DEFAULT_RETRY_POLICY: Readonly<RetryPolicy> = Object.freeze({
  maxAttempts: 8,
  baseDelayMs: 100,
  maxDelayMs: 5_000,
  totalBudgetMs: 30_000,
  requestTimeoutMs: 10_000,
});

/** The doubling stops here, as in the Rust client (`min(30)`). */
const MAX_EXPONENT = 30;

/**
 * The wait after failed attempt number `attempt` (1-based): full jitter over
 * `min(maxDelayMs, baseDelayMs × 2^(attempt−1))`, scaled by `jitter` in
 * [0, 1); never shorter than `retryAfterMs` (the server's `Retry-After`).
 */
export function backoffDelay(
  policy: Pick<RetryPolicy, "baseDelayMs" | "maxDelayMs">,
  attempt: number,
  jitter: number,
  retryAfterMs?: number,
): number {
  const exponent = Math.min(Math.max(attempt - 1, 0), MAX_EXPONENT);
  const cap = Math.min(policy.baseDelayMs * 2 ** exponent, policy.maxDelayMs);
  const jittered = cap * Math.min(Math.max(jitter, 0), 1);
  return retryAfterMs === undefined ? jittered : Math.max(jittered, retryAfterMs);
}

/** Whether an HTTP status may succeed on a retry: 429 and every 5xx. */
export function isRetryableStatus(status: number): boolean {
  return status === 429 || (status >= 500 && status <= 599);
}

/**
 * `Retry-After` in milliseconds: delta-seconds (what tally sends) or an
 * HTTP-date; `undefined` when absent or unreadable.
 */
export function parseRetryAfter(value: string | null | undefined, now: number = Date.now()): number | undefined {
  if (value === null || value === undefined) return undefined;
  const text = value.trim();
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  // An IMF-fixdate (RFC 9110 §5.6.7), e.g. `Tue, 01 Dec 2026 09:30:05 GMT`.
  if (!/^[A-Za-z]{3}, \d{2} [A-Za-z]{3} \d{4} \d{2}:\d{2}:\d{2} GMT$/.test(text)) return undefined;
  const date = Date.parse(text);
  if (Number.isNaN(date)) return undefined;
  return Math.max(0, date - now);
}

/**
 * A uniform number in [0, 1) from the platform's cryptographic randomness,
 * so that many clients retrying together spread out.
 */
export function jitter(): number {
  const words = new Uint32Array(2);
  globalThis.crypto.getRandomValues(words);
  // 53 random bits, like the Rust client's `u64 >> 11`.
  const high = (words[0] ?? 0) >>> 5; // 27 bits
  const low = (words[1] ?? 0) >>> 6; // 26 bits
  return (high * 2 ** 26 + low) / 2 ** 53;
}

/** Checks a policy's numbers, so a typo fails at construction, not at 3 a.m. */
export function validatePolicy(policy: RetryPolicy): RetryPolicy {
  const positive = (name: keyof RetryPolicy, min: number): void => {
    const value = policy[name];
    if (typeof value !== "number" || !Number.isFinite(value) || value < min) {
      throw new RangeError(`retry policy: ${name} must be a finite number ≥ ${min}, got ${String(value)}`);
    }
  };
  positive("maxAttempts", 1);
  if (!Number.isInteger(policy.maxAttempts)) {
    throw new RangeError(`retry policy: maxAttempts must be an integer, got ${policy.maxAttempts}`);
  }
  positive("baseDelayMs", 0);
  positive("maxDelayMs", 0);
  positive("totalBudgetMs", 0);
  positive("requestTimeoutMs", 1);
  return policy;
}
