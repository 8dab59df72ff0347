/**
 * How long a call may take and when it is tried again.
 *
 * A call is tried again only when doing so cannot apply it twice:
 * - a 503 or a 429 (the service says it could not serve the request now) and a connection
 *   that never opened are retried for every call;
 * - a connection that broke after the request went out, or an attempt that timed out (the
 *   answer lost, the request perhaps applied), is retried only for reads, recalls and appends,
 *   whose idempotency key makes the service answer a repeat with the original response and
 *   write nothing.
 * Retries are bounded by `Retries.attempts` and by `Timeouts.totalMs`, which covers the whole
 * call, waits included: a wait that would end past it is not started.
 */

import { ContextdError, Unavailable } from "./errors.js";

/** Milliseconds. `attemptMs` bounds each attempt; `totalMs` the whole call, retries included. */
export interface Timeouts {
  attemptMs: number;
  totalMs: number;
}

/** `attempts` counts the first try. Without a `Retry-After`, waits double from `backoffMs` up
 * to `maxBackoffMs`. */
export interface Retries {
  attempts: number;
  backoffMs: number;
  maxBackoffMs: number;
}

export const DEFAULT_TIMEOUTS: Timeouts = { attemptMs: 60_000, totalMs: 120_000 };
export const DEFAULT_RETRIES: Retries = { attempts: 4, backoffMs: 250, maxBackoffMs: 8_000 };

/** What repeating a call may do. */
export interface CallKind {
  /** Repeating it cannot apply it twice: retried even when an answer was lost. */
  isIdempotent: boolean;
  /** Probes answer for the moment they are asked: never retried. */
  isRetried: boolean;
}

/** Node's fetch (undici) names why a connection failed in the cause's `code`: these are the
 * failures before any byte of the request left, safe to repeat for any call. */
const NOT_SENT = new Set([
  "ECONNREFUSED",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "UND_ERR_CONNECT_TIMEOUT",
]);

export function isNotSent(failure: unknown): boolean {
  const cause = failure instanceof Error ? failure.cause : undefined;
  const code =
    typeof cause === "object" && cause !== null && "code" in cause ? cause.code : undefined;
  return typeof code === "string" && NOT_SENT.has(code);
}

export function isRetryable(failure: unknown, kind: CallKind): boolean {
  if (failure instanceof ContextdError) {
    return failure instanceof Unavailable;
  }
  return isNotSent(failure) || kind.isIdempotent;
}

/** Milliseconds to wait before attempt `attempt + 1`, or null: give up and throw. */
export function waitBeforeRetry(
  failure: unknown,
  {
    retries,
    kind,
    attempt,
    remainingMs,
  }: { retries: Retries; kind: CallKind; attempt: number; remainingMs: number },
): number | null {
  if (!kind.isRetried || attempt >= retries.attempts || !isRetryable(failure, kind)) {
    return null;
  }
  const wait =
    (failure instanceof Unavailable ? failure.retryAfterMs : null) ??
    Math.min(retries.backoffMs * 2 ** (attempt - 1), retries.maxBackoffMs);
  return wait < remainingMs ? wait : null;
}
