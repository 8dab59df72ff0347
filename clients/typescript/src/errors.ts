/**
 * Every failure a call can end in, carrying the service's error shape.
 *
 * The service answers every error as `{"error": {"code", "message", "details"}}`; the status
 * picks the class, the body fills it. A call that got no answer at all (the service unreachable,
 * or no answer within the timeout, after the retries it was allowed) throws `Unreachable`, whose
 * `status` is null.
 */

import type { components } from "./schema.js";

/** The service's error body, `{"error": {...}}` unwrapped. */
export type ErrorBody = components["schemas"]["ErrorBody"];

/** The service's `message`, then each of its `details` (`{loc, msg}`) the message does not
 * already say: a generic "the request failed validation" names no field and no allowed value;
 * its details do. */
export function explained(message: string, details: unknown): string {
  const notes: string[] = [];
  for (const detail of Array.isArray(details) ? (details as unknown[]) : []) {
    if (typeof detail !== "object" || detail === null) {
      continue;
    }
    const { msg, loc } = detail as { msg?: unknown; loc?: unknown };
    if (typeof msg !== "string" || message.includes(msg)) {
      continue;
    }
    const where = (Array.isArray(loc) ? loc : [])
      .filter((part) => part !== "body")
      .map(String)
      .join(".");
    notes.push(where === "" ? msg : `${where}: ${msg}`);
  }
  return [message, ...notes].join("; ");
}

export class ContextdError extends Error {
  readonly status: number | null;
  /** The error as the service said it: `message` is its human sentence (`Error.message` adds
   * the status and code in front, and what the details add: `explained`). */
  readonly body: ErrorBody;

  constructor(
    detail: string,
    { status, code, details }: { status: number | null; code: string; details?: unknown },
  ) {
    const said = explained(detail, details);
    super(status === null ? `${code}: ${said}` : `${status} ${code}: ${said}`);
    this.name = new.target.name;
    this.status = status;
    this.body = { code, message: detail, details: details ?? null };
  }

  get code(): string {
    return this.body.code;
  }

  get details(): unknown {
    return this.body.details;
  }
}

/** An evaluation job that ended without a result: it failed (`job.error` says why: the replay,
 * the service stopping, or the job lost with its process) or was cancelled. */
export class EvaluationEnded extends ContextdError {
  readonly job: { evaluation_id: string; status: string; error?: string | null };

  constructor(job: { evaluation_id: string; status: string; error?: string | null }) {
    super(`evaluation ${job.evaluation_id} ${job.status}${job.error ? `: ${job.error}` : ""}`, {
      status: null,
      code: `evaluation_${job.status}`,
    });
    this.job = job;
  }
}

/** 400: the body was not valid JSON. */
export class BadRequest extends ContextdError {}

/** 401: the API key is missing or unknown. */
export class Unauthorized extends ContextdError {}

/** 404: no such resource, or another tenant's. */
export class NotFound extends ContextdError {}

/** 409: the request contradicts the stored state (and wrote nothing). */
export class Conflict extends ContextdError {}

/** 409 `sequence_conflict`: `expected_last_seq` was not the session's last seq. */
export class SequenceConflict extends Conflict {
  readonly expected: number | null;
  readonly actual: number | null;

  constructor(
    detail: string,
    fields: { status: number | null; code: string; details?: unknown },
  ) {
    super(detail, fields);
    const seqs = isRecord(fields.details) ? fields.details : {};
    this.expected = typeof seqs.expected === "number" ? seqs.expected : null;
    this.actual = typeof seqs.actual === "number" ? seqs.actual : null;
  }
}

/** 413: the body or an item is over the service's limit (named in the message). */
export class PayloadTooLarge extends ContextdError {}

/** 422: well-formed JSON that breaks a rule; `details` lists `{loc, msg}`. */
export class ValidationFailed extends ContextdError {}

/**
 * 503: the service cannot serve now (its database is unreachable), or 429: the tenant has as many
 * costly calls under way as it may (`tenant_busy`); retried by the client until its attempts or
 * its total time run out. `retryAfterMs` is the service's `Retry-After`.
 */
export class Unavailable extends ContextdError {
  readonly retryAfterMs: number | null;

  constructor(
    detail: string,
    fields: { status: number | null; code: string; details?: unknown; retryAfterMs?: number | null },
  ) {
    super(detail, fields);
    this.retryAfterMs = fields.retryAfterMs ?? null;
  }
}

/** Any other 5xx: a fault of the service, never of the request. */
export class ServerError extends ContextdError {}

/** No answer: the connection failed or broke, or the attempt timed out (the cause is kept). */
export class Unreachable extends ContextdError {
  constructor(detail: string, options: { cause: unknown }) {
    super(detail, { status: null, code: "unreachable" });
    this.cause = options.cause;
  }
}

const BY_STATUS: Record<number, typeof ContextdError> = {
  400: BadRequest,
  401: Unauthorized,
  404: NotFound,
  409: Conflict,
  413: PayloadTooLarge,
  422: ValidationFailed,
};

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** `Retry-After` in milliseconds from `now`: either form RFC 9110 allows (seconds or a date). */
export function retryAfterMs(value: string | null, now: number = Date.now()): number | null {
  if (value === null) {
    return null;
  }
  const trimmed = value.trim();
  if (/^\d+$/.test(trimmed)) {
    return Number(trimmed) * 1000;
  }
  const when = Date.parse(trimmed);
  return Number.isNaN(when) ? null : Math.max(0, when - now);
}

/**
 * The exception an error answer stands for. `body` is the answer as read: the service's error
 * shape (parsed or as text), or whatever a proxy in between answered.
 */
export function errorFrom(response: Response, body: unknown): ContextdError {
  const status = response.status;
  let parsed = body;
  if (typeof body === "string") {
    try {
      parsed = JSON.parse(body);
    } catch {
      // Not JSON: a proxy or load balancer answered, and its text is the message.
    }
  }
  const error = isRecord(parsed) ? parsed.error : undefined;
  const fields =
    isRecord(error) && typeof error.code === "string" && typeof error.message === "string"
      ? { status, code: error.code, details: error.details ?? null }
      : { status, code: `http_${status}`, details: null };
  const detail =
    isRecord(error) && typeof error.message === "string"
      ? error.message
      : (typeof body === "string" ? body : JSON.stringify(body) ?? "").slice(0, 500) ||
        response.statusText;
  if (status === 503 || status === 429) {
    return new Unavailable(detail, {
      ...fields,
      retryAfterMs: retryAfterMs(response.headers.get("retry-after")),
    });
  }
  if (status === 409 && fields.code === "sequence_conflict") {
    return new SequenceConflict(detail, fields);
  }
  const kind = BY_STATUS[status] ?? (status >= 500 ? ServerError : ContextdError);
  return new kind(detail, fields);
}
