/**
 * `ContextdClient`: one method per operation of openapi.yaml, named after its `operationId` in
 * camelCase (`append_items` is `appendItems`), over `openapi-fetch` with the generated `paths`.
 *
 * Path parameters are positional, a request body is one object typed by the generated schema,
 * and every answer is the generated response type. Nothing is validated client-side: the
 * service is the one judge of a request and answers a bad one with a 422. An error answer
 * throws a `ContextdError` subclass; when a call is tried again is `policy`'s.
 */

import { setTimeout as sleep } from "node:timers/promises";
import { randomUUID } from "node:crypto";
import createClient from "openapi-fetch";
import { Agent } from "undici";

import { ContextdError, errorFrom, EvaluationEnded, Unreachable } from "./errors.js";
import {
  type CallKind,
  DEFAULT_RETRIES,
  DEFAULT_TIMEOUTS,
  type Retries,
  type Timeouts,
  waitBeforeRetry,
} from "./policy.js";
import type { components, paths } from "./schema.js";

type TraceApi = typeof import("@opentelemetry/api");
let traceApi: Promise<TraceApi | null> | undefined;

/** `@opentelemetry/api` when the runtime has it installed (it is an optional peer), else null:
 * loaded once, on the first call. */
function loadTraceApi(): Promise<TraceApi | null> {
  traceApi ??= import("@opentelemetry/api").catch(() => null);
  return traceApi;
}

export type Schemas = components["schemas"];
export type Format = "responses" | "chat" | "anthropic";
export type Modality = "text" | "image" | "audio";

/** One history entry in a request's `format`: provider JSON, never wrapped. */
export type Item = Record<string, unknown>;

export const USER_AGENT = "contextd-client-ts/0.1.0";

export interface ClientOptions {
  /** Where the service listens; default http://127.0.0.1:8000. */
  baseUrl?: string;
  /** Sent as `Authorization: Bearer <apiKey>`. */
  apiKey?: string;
  timeouts?: Partial<Timeouts>;
  retries?: Partial<Retries>;
  /** A fetch of your own (a proxy agent, instrumentation); default the global one, on the
   * client's own connection. */
  fetch?: (request: Request) => Promise<Response>;
}

/** Per call: a signal of the caller's (aborting ends the call and its retries at once) and a
 * bound on the whole call in place of `timeouts.totalMs`. */
export interface CallOptions {
  signal?: AbortSignal;
  timeoutMs?: number;
}

const READ: CallKind = { isIdempotent: true, isRetried: true };
const WRITE: CallKind = { isIdempotent: false, isRetried: true };
const PROBE: CallKind = { isIdempotent: false, isRetried: false };

/** What openapi-fetch answers, whatever the operation. */
interface Answer<T> {
  data?: T;
  error?: unknown;
  response: Response;
}

/**
 * A client keeps one connection to the service and sends its calls on it one after another, as
 * a session's calls are made anyway. The service finishes a call's work on its connection (the
 * stored plan of an assembly) before it reads the next request there; Node's fetch would
 * otherwise send the next call on a second connection while that work is still running. Close
 * the client (`close`) to release the connection.
 */
export class ContextdClient {
  readonly timeouts: Timeouts;
  readonly retries: Retries;
  /** The service's address, without a trailing slash. */
  readonly baseUrl: string;
  private readonly http: ReturnType<typeof createClient<paths>>;
  private readonly connection = new Agent({ connections: 1 });

  constructor(options: ClientOptions = {}) {
    this.timeouts = { ...DEFAULT_TIMEOUTS, ...options.timeouts };
    this.retries = { ...DEFAULT_RETRIES, ...options.retries };
    const headers: Record<string, string> = { "user-agent": USER_AGENT };
    if (options.apiKey !== undefined) {
      headers.authorization = `Bearer ${options.apiKey}`;
    }
    this.baseUrl = (options.baseUrl ?? "http://127.0.0.1:8000").replace(/\/+$/, "");
    this.http = createClient<paths>({
      baseUrl: this.baseUrl,
      headers,
      fetch:
        options.fetch ??
        ((request) => fetch(request, { dispatcher: this.connection } as RequestInit)),
    });
    // The caller's trace context (`traceparent`, `tracestate`) goes with every call, so that
    // the service's spans join the runtime's trace. Without OpenTelemetry's API, or with no
    // propagator registered (an SDK does that), nothing is added.
    this.http.use({
      async onRequest({ request }) {
        const api = await loadTraceApi();
        api?.propagation.inject(api.context.active(), request.headers, {
          set: (headers, key, value) => headers.set(key, value),
        });
        return request;
      },
    });
  }

  /** Releases the client's connection; calls made after it fail. */
  async close(): Promise<void> {
    await this.connection.close();
  }

  private async run<T>(
    kind: CallKind,
    label: string,
    send: (signal: AbortSignal) => Promise<Answer<T>>,
    options: CallOptions = {},
  ): Promise<T> {
    const deadline = Date.now() + (options.timeoutMs ?? this.timeouts.totalMs);
    for (let attempt = 1; ; attempt += 1) {
      const remainingMs = deadline - Date.now();
      const limit = AbortSignal.timeout(Math.max(1, Math.min(this.timeouts.attemptMs, remainingMs)));
      const signal =
        options.signal === undefined ? limit : AbortSignal.any([limit, options.signal]);
      let failure: unknown;
      try {
        const { data, error, response } = await send(signal);
        if (response.ok) {
          return data as T;
        }
        failure = errorFrom(response, error ?? "");
      } catch (thrown) {
        if (options.signal?.aborted) {
          throw options.signal.reason;
        }
        failure = thrown;
      }
      const wait = waitBeforeRetry(failure, {
        retries: this.retries,
        kind,
        attempt,
        remainingMs: deadline - Date.now(),
      });
      if (wait === null) {
        if (failure instanceof ContextdError) {
          throw failure;
        }
        throw new Unreachable(`${label} at ${this.baseUrl}: ${describeFailure(failure)}`, {
          cause: failure,
        });
      }
      await sleep(wait, undefined, options.signal === undefined ? {} : { signal: options.signal });
    }
  }

  /** The process is up (never retried). */
  healthz(options?: CallOptions): Promise<Schemas["HealthResponse"]> {
    return this.run(PROBE, "GET /healthz", (signal) => this.http.GET("/healthz", { signal }), options);
  }

  /** The database is reachable and migrated; `Unavailable` otherwise (never retried). */
  readyz(options?: CallOptions): Promise<Schemas["HealthResponse"]> {
    return this.run(PROBE, "GET /readyz", (signal) => this.http.GET("/readyz", { signal }), options);
  }

  /** The Prometheus text; `token` when the service asks for its own metrics token. */
  metrics({ token, ...options }: CallOptions & { token?: string } = {}): Promise<string> {
    const headers = token === undefined ? {} : { authorization: `Bearer ${token}` };
    return this.run(
      READ,
      "GET /metrics",
      (signal) => this.http.GET("/metrics", { signal, headers, parseAs: "text" }),
      options,
    );
  }

  /** A new session (or the existing one with identical attributes). */
  createSession(
    body: Schemas["CreateSessionRequest"],
    options?: CallOptions,
  ): Promise<Schemas["SessionResponse"]> {
    return this.run(
      WRITE,
      "POST /sessions",
      (signal) => this.http.POST("/sessions", { body, signal }),
      options,
    );
  }

  getSession(sessionId: string, options?: CallOptions): Promise<Schemas["SessionDetailResponse"]> {
    return this.run(
      READ,
      "GET /sessions/{session_id}",
      (signal) =>
        this.http.GET("/sessions/{session_id}", {
          params: { path: { session_id: sessionId } },
          signal,
        }),
      options,
    );
  }

  /**
   * Appends one atomic batch. Without an `idempotency_key` the client makes one, once per call
   * and before any attempt, so that its retries are answered with the original seqs and write
   * nothing.
   */
  appendItems(
    sessionId: string,
    body: Schemas["AppendRequest"],
    options?: CallOptions,
  ): Promise<Schemas["AppendResponse"]> {
    const keyed = { ...body, idempotency_key: body.idempotency_key ?? `ctxc-${randomUUID()}` };
    return this.run(
      READ,
      "POST /sessions/{session_id}/items",
      (signal) =>
        this.http.POST("/sessions/{session_id}/items", {
          params: { path: { session_id: sessionId } },
          body: keyed,
          signal,
        }),
      options,
    );
  }

  /** One page of the raw log: the items after `afterSeq`, exactly as appended. */
  listItems(
    sessionId: string,
    { afterSeq = 0, limit = 100, ...options }: CallOptions & { afterSeq?: number; limit?: number } = {},
  ): Promise<Schemas["ItemsPageResponse"]> {
    return this.run(
      READ,
      "GET /sessions/{session_id}/items",
      (signal) =>
        this.http.GET("/sessions/{session_id}/items", {
          params: { path: { session_id: sessionId }, query: { after_seq: afterSeq, limit } },
          signal,
        }),
      options,
    );
  }

  /** Every item of the raw log after `afterSeq`, fetching page after page. */
  async *iterItems(
    sessionId: string,
    { afterSeq = 0, pageSize = 100, ...options }: CallOptions & { afterSeq?: number; pageSize?: number } = {},
  ): AsyncGenerator<Schemas["LoggedItem"]> {
    let cursor: number | null | undefined = afterSeq;
    while (cursor !== null && cursor !== undefined) {
      const page = await this.listItems(sessionId, { afterSeq: cursor, limit: pageSize, ...options });
      yield* page.items;
      cursor = page.next_after_seq;
    }
  }

  /** The provider's token usage of one model call. */
  async reportUsage(
    sessionId: string,
    body: Schemas["UsageRequest"],
    options?: CallOptions,
  ): Promise<void> {
    await this.run(
      WRITE,
      "POST /sessions/{session_id}/usage",
      (signal) =>
        this.http.POST("/sessions/{session_id}/usage", {
          params: { path: { session_id: sessionId } },
          body,
          signal,
        }),
      options,
    );
  }

  /** Hides item `seq` (the newest shown when left out), with its call or outputs, from the
   * active history; the log keeps it. */
  retract(
    sessionId: string,
    body: Schemas["RetractionRequest"] = {},
    options?: CallOptions,
  ): Promise<Schemas["RetractionResponse"]> {
    return this.run(
      WRITE,
      "POST /sessions/{session_id}/retractions",
      (signal) =>
        this.http.POST("/sessions/{session_id}/retractions", {
          params: { path: { session_id: sessionId } },
          body,
          signal,
        }),
      options,
    );
  }

  /** Starts the active history empty from here on; the goal and world state stay. */
  reset(sessionId: string, options?: CallOptions): Promise<Schemas["ResetResponse"]> {
    return this.run(
      WRITE,
      "POST /sessions/{session_id}/reset",
      (signal) =>
        this.http.POST("/sessions/{session_id}/reset", {
          params: { path: { session_id: sessionId } },
          signal,
        }),
      options,
    );
  }

  /** Fact `seq` read back in a window of whole lines, or the lines matching `pattern`; the
   * answer's `tool_output` is the recall tool's output. Writes nothing, so it is retried like a
   * read. */
  recall(
    sessionId: string,
    body: Schemas["RecallRequest"],
    options?: CallOptions,
  ): Promise<Schemas["RecallResponse"]> {
    return this.run(
      READ,
      "POST /sessions/{session_id}/recall",
      (signal) =>
        this.http.POST("/sessions/{session_id}/recall", {
          params: { path: { session_id: sessionId } },
          body,
          signal,
        }),
      options,
    );
  }

  /** The session's logged turns replayed under its own settings (`current`) and each of
   * `variants`: what each would have cost and shown. Writes nothing. A long one runs as a job,
   * followed every `pollMs` until it is done (`EvaluationEnded` if it failed or was
   * cancelled). */
  async evaluate(
    sessionId: string,
    body: Schemas["EvaluateRequest"] = {},
    { pollMs = 1000, ...options }: CallOptions & { pollMs?: number } = {},
  ): Promise<Schemas["EvaluateResponse"]> {
    let answer: Schemas["EvaluateResponse"] | Schemas["EvaluationJobResponse"] = await this.run(
      READ,
      "POST /sessions/{session_id}/evaluate",
      (signal) =>
        this.http.POST("/sessions/{session_id}/evaluate", {
          params: { path: { session_id: sessionId } },
          body,
          signal,
        }),
      options,
    );
    while ("evaluation_id" in answer) {
      if (answer.status === "done" && answer.result) {
        return answer.result;
      }
      if (answer.status !== "running") {
        throw new EvaluationEnded(answer);
      }
      await sleep(pollMs, undefined, options.signal === undefined ? {} : { signal: options.signal });
      answer = await this.getEvaluation(answer.evaluation_id, options);
    }
    return answer;
  }

  /** Where an evaluation job stands. */
  getEvaluation(
    evaluationId: string,
    options?: CallOptions,
  ): Promise<Schemas["EvaluationJobResponse"]> {
    return this.run(
      READ,
      "GET /evaluations/{evaluation_id}",
      (signal) =>
        this.http.GET("/evaluations/{evaluation_id}", {
          params: { path: { evaluation_id: evaluationId } },
          signal,
        }),
      options,
    );
  }

  /** Cancels an evaluation job if it is running; where it stands either way. */
  cancelEvaluation(
    evaluationId: string,
    options?: CallOptions,
  ): Promise<Schemas["EvaluationJobResponse"]> {
    return this.run(
      READ,
      "DELETE /evaluations/{evaluation_id}",
      (signal) =>
        this.http.DELETE("/evaluations/{evaluation_id}", {
          params: { path: { evaluation_id: evaluationId } },
          signal,
        }),
      options,
    );
  }

  normalize(
    body: Schemas["NormalizeRequest"],
    options?: CallOptions,
  ): Promise<Schemas["NormalizeResponse"]> {
    return this.run(
      WRITE,
      "POST /history/normalize",
      (signal) => this.http.POST("/history/normalize", { body, signal }),
      options,
    );
  }

  /** The active, model-visible history, normalized. */
  getHistory(
    sessionId: string,
    {
      outputFormat,
      inputModalities,
      ...options
    }: CallOptions & { outputFormat?: Format; inputModalities?: Modality[] } = {},
  ): Promise<Schemas["HistoryResponse"]> {
    const query = {
      ...(outputFormat === undefined ? {} : { output_format: outputFormat }),
      ...(inputModalities === undefined ? {} : { input_modalities: inputModalities.join(",") }),
    };
    return this.run(
      READ,
      "GET /sessions/{session_id}/history",
      (signal) =>
        this.http.GET("/sessions/{session_id}/history", {
          params: { path: { session_id: sessionId }, query },
          signal,
        }),
      options,
    );
  }

  assemble(
    body: Schemas["AssembleRequest"],
    options?: CallOptions,
  ): Promise<Schemas["AssembleResponse"]> {
    return this.run(
      WRITE,
      "POST /assemble",
      (signal) => this.http.POST("/assemble", { body, signal }),
      options,
    );
  }

  getAssembly(
    assemblyId: string,
    options?: CallOptions,
  ): Promise<Schemas["StoredAssemblyResponse"]> {
    return this.run(
      READ,
      "GET /assemblies/{assembly_id}",
      (signal) =>
        this.http.GET("/assemblies/{assembly_id}", {
          params: { path: { assembly_id: assemblyId } },
          signal,
        }),
      options,
    );
  }

  replayAssembly(
    assemblyId: string,
    body: Schemas["ReplayRequest"] = {},
    options?: CallOptions,
  ): Promise<Schemas["ReplayResponse"]> {
    return this.run(
      WRITE,
      "POST /assemblies/{assembly_id}/replay",
      (signal) =>
        this.http.POST("/assemblies/{assembly_id}/replay", {
          params: { path: { assembly_id: assemblyId } },
          body,
          signal,
        }),
      options,
    );
  }

  putGoal(
    sessionId: string,
    body: Schemas["GoalRequest"],
    options?: CallOptions,
  ): Promise<Schemas["GoalResponse"]> {
    return this.run(
      WRITE,
      "PUT /sessions/{session_id}/goal",
      (signal) =>
        this.http.PUT("/sessions/{session_id}/goal", {
          params: { path: { session_id: sessionId } },
          body,
          signal,
        }),
      options,
    );
  }

  putWorldState(
    sessionId: string,
    body: Schemas["WorldStateRequest"],
    options?: CallOptions,
  ): Promise<Schemas["WorldStateResponse"]> {
    return this.run(
      WRITE,
      "PUT /sessions/{session_id}/world-state",
      (signal) =>
        this.http.PUT("/sessions/{session_id}/world-state", {
          params: { path: { session_id: sessionId } },
          body,
          signal,
        }),
      options,
    );
  }

  compact(
    body: Schemas["CompactRequest"],
    options?: CallOptions,
  ): Promise<Schemas["CompactResponse"]> {
    return this.run(
      WRITE,
      "POST /compact",
      (signal) => this.http.POST("/compact", { body, signal }),
      options,
    );
  }

  /** The advice for the session's next call in the lineage of `unit` (default: the
   * session's own), priced by that lineage's prompt cache. */
  compactionAdvice(
    sessionId: string,
    { unit, ...options }: CallOptions & { unit?: string } = {},
  ): Promise<Schemas["AdviceResponse"]> {
    return this.run(
      READ,
      "GET /sessions/{session_id}/compaction-advice",
      (signal) =>
        this.http.GET("/sessions/{session_id}/compaction-advice", {
          params: {
            path: { session_id: sessionId },
            query: unit === undefined ? {} : { unit },
          },
          signal,
        }),
      options,
    );
  }

  contextWindow(
    sessionId: string,
    options?: CallOptions,
  ): Promise<Schemas["ContextWindowResponse"]> {
    return this.run(
      READ,
      "GET /sessions/{session_id}/context-window",
      (signal) =>
        this.http.GET("/sessions/{session_id}/context-window", {
          params: { path: { session_id: sessionId } },
          signal,
        }),
      options,
    );
  }

  endSession(
    sessionId: string,
    body: Schemas["EndSessionRequest"] = {},
    options?: CallOptions,
  ): Promise<Schemas["EndSessionResponse"]> {
    return this.run(
      WRITE,
      "POST /sessions/{session_id}/end",
      (signal) =>
        this.http.POST("/sessions/{session_id}/end", {
          params: { path: { session_id: sessionId } },
          body,
          signal,
        }),
      options,
    );
  }

  delegate(
    parentId: string,
    body: Schemas["DelegateRequest"],
    options?: CallOptions,
  ): Promise<Schemas["ChildSessionResponse"]> {
    return this.run(
      WRITE,
      "POST /sessions/{session_id}/delegate",
      (signal) =>
        this.http.POST("/sessions/{session_id}/delegate", {
          params: { path: { session_id: parentId } },
          body,
          signal,
        }),
      options,
    );
  }

  fork(
    parentId: string,
    body: Schemas["ForkRequest"],
    options?: CallOptions,
  ): Promise<Schemas["ChildSessionResponse"]> {
    return this.run(
      WRITE,
      "POST /sessions/{session_id}/fork",
      (signal) =>
        this.http.POST("/sessions/{session_id}/fork", {
          params: { path: { session_id: parentId } },
          body,
          signal,
        }),
      options,
    );
  }

  merge(
    sessionId: string,
    body: Schemas["ConclusionRequest"],
    options?: CallOptions,
  ): Promise<Schemas["ConclusionResponse"]> {
    return this.run(
      WRITE,
      "POST /sessions/{session_id}/merge",
      (signal) =>
        this.http.POST("/sessions/{session_id}/merge", {
          params: { path: { session_id: sessionId } },
          body,
          signal,
        }),
      options,
    );
  }

  putManifest(
    name: string,
    body: Schemas["ManifestRequest"],
    options?: CallOptions,
  ): Promise<Schemas["ManifestVersionResponse"]> {
    return this.run(
      WRITE,
      "PUT /manifests/{name}",
      (signal) =>
        this.http.PUT("/manifests/{name}", { params: { path: { name } }, body, signal }),
      options,
    );
  }

  getManifest(name: string, options?: CallOptions): Promise<Schemas["ManifestResponse"]> {
    return this.run(
      READ,
      "GET /manifests/{name}",
      (signal) => this.http.GET("/manifests/{name}", { params: { path: { name } }, signal }),
      options,
    );
  }
}

/** A call's failure to get an answer, with what caused it: `fetch failed` alone names neither
 * the refusal nor the address (`connect ECONNREFUSED 127.0.0.1:8000` does). */
function describeFailure(failure: unknown): string {
  const said = String(failure);
  const cause = failure instanceof Error ? failure.cause : undefined;
  if (cause instanceof Error && !said.includes(cause.message)) {
    return `${said} (${cause.message})`;
  }
  return said;
}
