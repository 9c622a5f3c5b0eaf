/**
 * One logical request, sent with retries: the same method, URL and body
 * bytes on every attempt (so the same upstream ID), each attempt bounded
 * by `requestTimeoutMs`, retried only when it may succeed later.
 */

import {
  type AttemptFailure,
  RetriesExhausted,
  TallyError,
  TransportError,
  problemError,
} from "./errors.js";
import { type RetryPolicy, backoffDelay, parseRetryAfter } from "./retry.js";

/** What `onRetry` is told before the client waits and tries again. */
export interface RetryEvent {
  readonly method: string;
  /** The path and query string. */
  readonly path: string;
  /** The attempt that just failed (1-based). */
  readonly attempt: number;
  /** Why it failed: a retryable answer (429, 5xx) or no answer. */
  readonly error: AttemptFailure;
  /** How long the client waits before the next attempt. */
  readonly delayMs: number;
  /** Milliseconds since the first attempt started. */
  readonly elapsedMs: number;
}

export interface TransportConfig {
  readonly baseUrl: string;
  readonly apiKey: string;
  readonly policy: RetryPolicy;
  readonly fetch: typeof globalThis.fetch;
  readonly userAgent: string;
  /** Uniform in [0, 1): the jitter source. */
  readonly random: () => number;
  readonly onRetry: ((event: RetryEvent) => void) | undefined;
}

export interface HttpRequest {
  readonly method: string;
  /** Path and query string, appended to the base URL. */
  readonly path: string;
  /** The JSON text of the body, serialised once for every attempt. */
  readonly body?: string | undefined;
  readonly accept: string;
  /** Cancels the whole call (not retried). */
  readonly signal?: AbortSignal | undefined;
  /** Sent as `X-Request-Id` on every attempt. */
  readonly requestId?: string | undefined;
  /**
   * How long (ms) the server may hold the answer on purpose (a long poll,
   * `wait_ms`): added to `requestTimeoutMs` for each attempt, so the wait
   * is not taken for a lost answer and retried.
   */
  readonly waitMs?: number | undefined;
}

/** A success (2xx) answer. */
export interface HttpAnswer {
  readonly status: number;
  readonly headers: Headers;
  readonly text: string;
  /** HTTP attempts made, 1 when nothing was retried. */
  readonly attempts: number;
}

type Outcome = { readonly ok: true; readonly answer: Omit<HttpAnswer, "attempts"> } | { readonly ok: false; readonly failure: AttemptFailure };

export class Transport {
  readonly #config: TransportConfig;

  constructor(config: TransportConfig) {
    this.#config = config;
  }

  get policy(): RetryPolicy {
    return this.#config.policy;
  }

  /**
   * Sends until a final answer: resolves with a 2xx, throws a
   * {@link TallyError} for a final problem, {@link RetriesExhausted} when
   * the policy gives up, or the signal's reason when the caller aborts.
   */
  async send(request: HttpRequest): Promise<HttpAnswer> {
    const { policy, random, onRetry } = this.#config;
    const started = performance.now();
    for (let attempt = 1; ; attempt += 1) {
      const outcome = await this.#attempt(request);
      if (outcome.ok) return { ...outcome.answer, attempts: attempt };
      const failure = outcome.failure;
      if (!failure.retryable) throw failure;
      const elapsed = (): number => performance.now() - started;
      if (attempt >= policy.maxAttempts) {
        throw new RetriesExhausted(attempt, elapsed(), failure, "max_attempts");
      }
      const retryAfterMs = failure instanceof TallyError ? failure.retryAfterMs : undefined;
      const delayMs = backoffDelay(policy, attempt, random(), retryAfterMs);
      if (elapsed() + delayMs > policy.totalBudgetMs) {
        throw new RetriesExhausted(attempt, elapsed(), failure, "time_budget");
      }
      onRetry?.({ method: request.method, path: request.path, attempt, error: failure, delayMs, elapsedMs: elapsed() });
      await sleep(delayMs, request.signal);
    }
  }

  /** One HTTP exchange, headers and body, within the attempt timeout. */
  async #attempt(request: HttpRequest): Promise<Outcome> {
    const { baseUrl, apiKey, policy, userAgent } = this.#config;
    request.signal?.throwIfAborted();
    const waitMs = request.waitMs !== undefined && Number.isFinite(request.waitMs) && request.waitMs > 0 ? request.waitMs : 0;
    const timeout = AbortSignal.timeout(policy.requestTimeoutMs + waitMs);
    const signal = request.signal ? anySignal(request.signal, timeout) : timeout;
    const headers: Record<string, string> = {
      accept: request.accept,
      authorization: `Bearer ${apiKey}`,
      "user-agent": userAgent,
    };
    if (request.body !== undefined) headers["content-type"] = "application/json";
    if (request.requestId !== undefined) headers["x-request-id"] = request.requestId;
    let status: number;
    let responseHeaders: Headers;
    let text: string;
    try {
      const response = await this.#config.fetch(baseUrl + request.path, {
        method: request.method,
        headers,
        body: request.body ?? null,
        signal,
        redirect: "manual",
      });
      status = response.status;
      responseHeaders = response.headers;
      // Reading the body is part of the attempt: a connection lost here is
      // a lost answer like any other, and is retried.
      text = await response.text();
    } catch (error) {
      if (request.signal?.aborted) throw request.signal.reason;
      const timedOut = timeout.aborted;
      return { ok: false, failure: new TransportError(describeFetchError(error), { timeout: timedOut, cause: error }) };
    }
    if (status >= 200 && status <= 299) {
      return { ok: true, answer: { status, headers: responseHeaders, text } };
    }
    const context = {
      requestId: responseHeaders.get("x-request-id") ?? undefined,
      retryAfterMs: parseRetryAfter(responseHeaders.get("retry-after")),
      replayed: responseHeaders.get("idempotent-replayed") === "true",
    };
    return { ok: false, failure: problemError(status, parseJson(text), context) };
  }
}

/** `AbortSignal.any` (Node ≥ 20.3), or the same by hand before it. */
export function anySignal(a: AbortSignal, b: AbortSignal): AbortSignal {
  if (typeof AbortSignal.any === "function") return AbortSignal.any([a, b]);
  const controller = new AbortController();
  for (const signal of [a, b]) {
    if (signal.aborted) {
      controller.abort(signal.reason);
      break;
    }
    signal.addEventListener("abort", () => controller.abort(signal.reason), { once: true });
  }
  return controller.signal;
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** `fetch failed` says little; its cause (ECONNREFUSED, other side closed) says more. */
function describeFetchError(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const cause = error.cause;
  if (cause instanceof Error) {
    const code = (cause as { code?: unknown }).code;
    return `${error.message}: ${typeof code === "string" ? `${code} ` : ""}${cause.message}`;
  }
  return error.message;
}

/** Waits `ms`; rejects with the signal's reason if it aborts first. */
export function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
