/**
 * What every framework adapter does around one model call, written once: mirror the
 * framework's messages into the session's fact log, hand the model the assembled context instead
 * of the raw list (compacting first when the service advises it), report the provider's usage
 * against the assembly the model was given, and answer the model's recall calls.
 *
 * Invariants (the same as the Python client's runtime, which this mirrors):
 *
 * - **An entry is appended once.** An entry is one framework message (or item) translated into
 *   provider items. Its idempotency key is derived from the session, its position in the
 *   framework's list and a digest of its items, so sending it again — a retry, a second process
 *   mirroring the same thread, a restart that forgot what was sent — is answered with the
 *   original seqs and writes nothing. The digest is the Python client's (canonical JSON of
 *   `[format, items]`, keys sorted), so a thread mirrored from both languages keys alike.
 * - **In order, before the assembly.** Entries are appended in list order, each as its own
 *   atomic batch, and all of them before the assembly of the call that follows, so the model
 *   always sees every message the framework holds.
 * - **Nothing unknown throws.** An item of a type the service does not know is kept in the log
 *   and comes back in the append's `excluded`; it is collected in `excluded`.
 * - **One compaction per call at most.** When the assembly advises compaction, the session is
 *   compacted and assembled once more; the second assembly is what the model gets.
 * - **A recall answers the model, whatever it asked.** `recall` runs the model's call of the
 *   recall tool against the session and returns the tool's output (see `recall.ts`). It writes
 *   nothing: the call and its output are framework messages, mirrored like any other.
 */

import { createHash } from "node:crypto";

import type { CallOptions, ContextdClient, Format, Item, Schemas } from "./client.js";
import { ContextdError, NotFound } from "./errors.js";
import { InvalidArguments, isRefusal, recallRequest, refusalOutput } from "./recall.js";

export type Strategy = "clear_tool_results" | "truncate" | "summary" | "handoff" | "notes";

/** One framework message as provider items in `format`: appended as one batch. */
export interface Entry {
  items: Item[];
  format: Format;
}

/** What the provider reported for one model call. */
export interface Usage {
  inputTokens: number;
  cachedTokens: number;
  outputTokens: number;
}

/** JSON with object keys sorted and no spaces: the text Python's
 * `json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)` writes. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) {
    return `[${value.map(canonicalJson).join(",")}]`;
  }
  if (typeof value === "object" && value !== null) {
    const record = value as Record<string, unknown>;
    const fields = Object.keys(record)
      .filter((key) => record[key] !== undefined)
      .sort()
      .map((key) => `${JSON.stringify(key)}:${canonicalJson(record[key])}`);
    return `{${fields.join(",")}}`;
  }
  return JSON.stringify(value) ?? "null";
}

function sha256(text: string): string {
  return createHash("sha256").update(text, "utf8").digest("hex");
}

/** A digest of what the entry says, independent of key order in its objects. */
export function entryDigest(entry: Entry): string {
  return sha256(canonicalJson([entry.format, entry.items]));
}

/** The append key of the entry at `position` with `digest`: the same entry always gets the
 * same key, and a key never names two different entries. */
export function idempotencyKey(sessionId: string, position: number, digest: string): string {
  return `mirror-${sha256(`${sessionId}\0${position}\0${digest}`)}`;
}

export interface PendingEntry {
  position: number;
  entry: Entry;
  idempotencyKey: string;
}

/**
 * Which entries of a framework's list the session already holds: the longest prefix that was
 * appended (by digest). Everything after it is pending, even when an earlier entry was rewritten
 * by another component — the log is append-only, so the rewrite is new content. No I/O.
 */
export class Mirror {
  readonly sessionId: string;
  appended: string[] = [];

  constructor(sessionId: string) {
    this.sessionId = sessionId;
  }

  pending(entries: readonly Entry[]): PendingEntry[] {
    const digests = entries.map(entryDigest);
    let common = 0;
    while (common < this.appended.length && this.appended[common] === digests[common]) {
      common += 1;
    }
    this.appended = this.appended.slice(0, common);
    return entries.slice(common).map((entry, offset) => {
      const position = common + offset;
      return {
        position,
        entry,
        idempotencyKey: idempotencyKey(this.sessionId, position, digests[position] ?? ""),
      };
    });
  }

  mark(pending: PendingEntry): void {
    if (pending.position !== this.appended.length) {
      throw new Error("entries are appended in order");
    }
    this.appended.push(entryDigest(pending.entry));
  }
}

/**
 * How a link assembles and compacts. `session` holds the attributes a missing session is
 * created with (`model`, `context_window`, `encoding`, `metadata`, `hooks`, `recall_tool`).
 * `compactStrategy` unset follows the service's `recommended_strategy`; `compact: false` never
 * compacts (the advice still comes back in `lastAssembly`).
 */
export interface LinkOptions {
  outputFormat?: Format;
  unit?: string;
  phase?: string;
  compact?: boolean;
  compactStrategy?: Strategy;
  session?: Omit<Schemas["CreateSessionRequest"], "session_id">;
  /** Passed to every call the link makes (a signal, a timeout). */
  call?: CallOptions;
}

function scoped(options: LinkOptions): { unit?: string; phase?: string } {
  return {
    ...(options.unit === undefined ? {} : { unit: options.unit }),
    ...(options.phase === undefined ? {} : { phase: options.phase }),
  };
}

/**
 * One session seen from a framework: `record` the framework's whole list before a model call,
 * send `context()`'s messages, then `report` the model's usage.
 */
export class ContextLink {
  readonly client: ContextdClient;
  readonly sessionId: string;
  readonly options: LinkOptions;
  readonly mirror: Mirror;
  readonly excluded: Schemas["ExcludedItem"][] = [];
  readonly compactions: Schemas["CompactResponse"][] = [];
  lastAssembly: Schemas["AssembleResponse"] | null = null;
  private sessionKnown = false;

  constructor(client: ContextdClient, sessionId: string, options: LinkOptions = {}) {
    this.client = client;
    this.sessionId = sessionId;
    this.options = options;
    this.mirror = new Mirror(sessionId);
  }

  /** Creates the session with `options.session` unless it exists. */
  async ensureSession(): Promise<void> {
    if (this.sessionKnown) {
      return;
    }
    try {
      await this.client.getSession(this.sessionId, this.options.call);
    } catch (error) {
      if (!(error instanceof NotFound)) {
        throw error;
      }
      await this.client.createSession(
        { ...this.options.session, session_id: this.sessionId },
        this.options.call,
      );
    }
    this.sessionKnown = true;
  }

  /** Appends one entry as it is (outside the mirrored list, e.g. a Session's `addItems`). */
  async append(entry: Entry, idempotencyKey?: string): Promise<Schemas["AppendResponse"]> {
    await this.ensureSession();
    const answer = await this.client.appendItems(
      this.sessionId,
      {
        items: entry.items,
        format: entry.format,
        ...scoped(this.options),
        ...(idempotencyKey === undefined ? {} : { idempotency_key: idempotencyKey }),
      },
      this.options.call,
    );
    this.excluded.push(...(answer.excluded ?? []));
    return answer;
  }

  /** Appends the entries of the framework's list the session does not hold yet; returns how
   * many were sent. */
  async record(entries: readonly Entry[]): Promise<number> {
    const pending = this.mirror.pending(entries);
    for (const each of pending) {
      if (each.entry.items.length > 0) {
        await this.append(each.entry, each.idempotencyKey);
      }
      this.mirror.mark(each);
    }
    return pending.length;
  }

  /** The session-mode assembly of this session, without compacting. */
  async assemble(): Promise<Schemas["AssembleResponse"]> {
    await this.ensureSession();
    return this.client.assemble(
      {
        session_id: this.sessionId,
        output_format: this.options.outputFormat ?? "responses",
        ...scoped(this.options),
      },
      this.options.call,
    );
  }

  /** The session-mode assembly to send; compacts first (once) when advised, and assembles
   * again when the compaction applied (the service then takes the assembly that advised it as
   * never sent). */
  async context(): Promise<Schemas["AssembleResponse"]> {
    let assembly = await this.assemble();
    if ((this.options.compact ?? true) && assembly.advice.should_compact) {
      const strategy =
        this.options.compactStrategy ??
        (assembly.advice.recommended_strategy as Strategy | null | undefined) ??
        "summary";
      // A configured strategy that cannot apply falls back to the recommended one: posted
      // again on every step, a no-op would leave the pressure where it is.
      const compaction = await this.client.compact(
        { session_id: this.sessionId, strategy, fallback: true },
        this.options.call,
      );
      this.compactions.push(compaction);
      // Else the context already made is the one to send.
      if (compaction.applied) assembly = await this.assemble();
    }
    this.lastAssembly = assembly;
    return assembly;
  }

  /** Reports one model call's usage, against the last assembly unless told another. */
  async report(usage: Usage, assemblyId?: string | null): Promise<void> {
    await this.client.reportUsage(
      this.sessionId,
      {
        input_tokens: usage.inputTokens,
        cached_tokens: usage.cachedTokens,
        output_tokens: usage.outputTokens,
        assembly_id: assemblyId ?? this.lastAssembly?.assembly_id ?? null,
        ...scoped(this.options),
      },
      this.options.call,
    );
  }

  /** The output of the model's recall call with `args` (JSON text or parsed): the service's
   * `tool_output`, or why it refused them. Throws only when the service could not answer (5xx,
   * unreachable), as every other call of the link does. */
  async recall(args: unknown): Promise<string> {
    let body: Schemas["RecallRequest"];
    try {
      body = recallRequest(args);
    } catch (error) {
      if (error instanceof InvalidArguments) {
        return error.message;
      }
      throw error;
    }
    try {
      return (await this.client.recall(this.sessionId, body, this.options.call)).tool_output;
    } catch (error) {
      if (error instanceof ContextdError && isRefusal(error)) {
        return refusalOutput(error);
      }
      throw error;
    }
  }
}
