/**
 * OpenAI Agents JS (`@openai/agents-core` 0.14) on contextd: `ContextdSession` is the SDK's
 * `Session` over a contextd session, its `callModelInputFilter` hands the model the session's
 * assembled context instead of the SDK's list, and `withUsage(model)` reports what each model
 * call counted against the assembly it was given.
 *
 *     const session = new ContextdSession("demo", { baseUrl, apiKey });
 *     const agent = new Agent({ name: "engineer", model: session.withUsage(model),
 *                               tools: [...myTools, session.recallTool()] });
 *     const result = await run(agent, "fix the bug", {
 *       session, callModelInputFilter: session.callModelInputFilter });
 *
 * Invariants (those of the Python Agents SDK adapter):
 *
 * - **The model sees the assembly.** With the filter in place every model call gets exactly the
 *   session-mode `/assemble` messages, converted to the SDK's items (goal pinned first and last,
 *   world state, pairing valid), compacted first when the service advises it
 *   (`ContextLink.context`).
 * - **Items are Responses items in the log.** The SDK's own item shapes (`callId`,
 *   `function_call_result`, reasoning `content`) are written as the Responses items a provider
 *   takes (`call_id`, `function_call_output`, reasoning `summary`), so a run logs the same items
 *   whichever language's SDK made it. An item with no Responses form is kept as an unknown item
 *   `agents:<type>` holding it: in the log, reported in `excluded`, never shown to the model.
 * - **Every item of the run is in the session before the model is called.** The SDK writes the
 *   run's input and each turn's items through `addItems` at points of its own, some after the
 *   model call. The filter therefore appends whatever of the model input the session does not
 *   hold yet.
 * - **Nothing is written twice.** What the session holds is judged by `HeldItems` (no I/O): the
 *   input follows the last list known to be held as a whole (the filter's previous input, or
 *   what `getItems` returned), and only what comes after that list and was not written since is
 *   missing. Items the filter wrote ahead of the SDK are dropped from the SDK's later `addItems`.
 * - **Usage is reported against the assembly the call used.** This SDK has no hook after each
 *   model call, so `withUsage` wraps the agent's model: each response's usage (streamed or not)
 *   is reported as soon as it arrives, against the filter's assembly for that call.
 * - **What the context leaves out can be read back.** `recallTool()` is the service's recall
 *   tool (`context_recall`) as the SDK's own function tool, run against this session; its call
 *   and output are run items like any other, so they reach the log the same way.
 *
 * One `ContextdSession` serves one run at a time.
 */

import {
  type AgentInputItem,
  type CallModelInputFilterArgs,
  type FunctionTool,
  type Model,
  type ModelInputData,
  type ModelRequest,
  type ModelResponse,
  type Session,
  type StreamEvent,
} from "@openai/agents-core";

import { ContextdClient, type ClientOptions, type Item, type Schemas } from "./client.js";
import { Conflict } from "./errors.js";
import { RECALL_TOOL_DESCRIPTION, RECALL_TOOL_NAME, recallToolParameters } from "./recall.js";
import { ContextLink, entryDigest, type LinkOptions, type Usage } from "./runtime.js";

/** The service refuses a longer item `type` (422), which would make an odd item throw. */
const MAX_ITEM_TYPE = 64;

type Record_ = Record<string, unknown>;

function isRecord(value: unknown): value is Record_ {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function defined(fields: Record_): Record_ {
  return Object.fromEntries(Object.entries(fields).filter(([, value]) => value !== undefined));
}

function textOf(content: unknown): string {
  if (typeof content === "string") {
    return content;
  }
  return (Array.isArray(content) ? content : [])
    .map((part) => (isRecord(part) && typeof part.text === "string" ? part.text : ""))
    .join("");
}

function unknownItem(item: Record_): Item {
  return { type: `agents:${String(item.type ?? item.role)}`.slice(0, MAX_ITEM_TYPE), item };
}

/** One of the SDK's content parts of a user or system message as a Responses part, or null. */
function inputPart(part: unknown): Item | null {
  if (!isRecord(part)) {
    return null;
  }
  switch (part.type) {
    case "input_text":
      return { type: "input_text", text: part.text };
    case "input_image": {
      const image = part.image;
      const source =
        typeof image === "string"
          ? { image_url: image }
          : isRecord(image) && typeof image.id === "string"
            ? { file_id: image.id }
            : null;
      return source === null ? null : { type: "input_image", detail: part.detail ?? "auto", ...source };
    }
    default:
      return null;
  }
}

/**
 * The SDK's item as a Responses input item (`call_id`, `function_call_output`, reasoning
 * `summary`), or an unknown `agents:<type>` item holding it when it has no such form.
 */
export function toResponsesItem(agentItem: AgentInputItem): Item {
  const item = agentItem as unknown as Record_;
  if ((item.type === undefined || item.type === "message") && typeof item.role === "string") {
    const role = item.role;
    if (role === "assistant") {
      const parts = (Array.isArray(item.content) ? item.content : []).map((part: unknown) =>
        isRecord(part) && part.type === "output_text"
          ? { type: "output_text", text: part.text, annotations: [] }
          : isRecord(part) && part.type === "refusal"
            ? { type: "refusal", refusal: part.refusal }
            : null,
      );
      if (parts.includes(null)) {
        return unknownItem(item);
      }
      return defined({
        type: "message",
        role,
        id: item.id,
        status: item.status ?? "completed",
        content: parts,
      });
    }
    if (role === "user" || role === "system" || role === "developer") {
      if (typeof item.content === "string") {
        return { type: "message", role, content: item.content };
      }
      const parts = (Array.isArray(item.content) ? item.content : []).map(inputPart);
      return parts.includes(null) ? unknownItem(item) : { type: "message", role, content: parts };
    }
    return unknownItem(item);
  }
  switch (item.type) {
    case "function_call":
      return defined({
        type: "function_call",
        id: item.id,
        call_id: item.callId,
        name: item.name,
        arguments: item.arguments,
        status: item.status,
      });
    case "function_call_result": {
      const output = item.output;
      if (typeof output === "string") {
        return { type: "function_call_output", call_id: item.callId, output };
      }
      if (isRecord(output) && output.type === "text") {
        return { type: "function_call_output", call_id: item.callId, output: output.text };
      }
      return unknownItem(item);
    }
    case "reasoning": {
      const encrypted = isRecord(item.providerData) ? item.providerData.encryptedContent : undefined;
      return defined({
        type: "reasoning",
        id: item.id,
        summary: (Array.isArray(item.content) ? item.content : []).map((part: unknown) => ({
          type: "summary_text",
          text: isRecord(part) ? part.text : "",
        })),
        encrypted_content: encrypted,
      });
    }
    default:
      return unknownItem(item);
  }
}

/**
 * Responses items (an assembly's messages, a retraction's items) as the SDK's items. A call's
 * output takes its tool name from the call in the same list. Developer messages become system
 * messages, the role the SDK knows for them. An item of another type is passed as it is.
 */
export function toAgentItems(items: readonly Item[]): AgentInputItem[] {
  const names = new Map<string, string>();
  for (const item of items) {
    if (item.type === "function_call" && typeof item.call_id === "string") {
      names.set(item.call_id, String(item.name));
    }
  }
  return items.map((item): AgentInputItem => {
    if ((item.type === undefined || item.type === "message") && typeof item.role === "string") {
      if (item.role === "assistant") {
        const content =
          typeof item.content === "string"
            ? [{ type: "output_text", text: item.content }]
            : (Array.isArray(item.content) ? item.content : []).map((part: unknown) =>
                isRecord(part) && part.type === "refusal"
                  ? { type: "refusal", refusal: part.refusal }
                  : { type: "output_text", text: isRecord(part) ? part.text : "" },
              );
        return defined({
          type: "message",
          role: "assistant",
          id: item.id,
          status: item.status ?? "completed",
          content,
        }) as unknown as AgentInputItem;
      }
      if (item.role === "system" || item.role === "developer") {
        return { type: "message", role: "system", content: textOf(item.content) };
      }
      if (typeof item.content === "string") {
        return { type: "message", role: "user", content: item.content };
      }
      const parts = (Array.isArray(item.content) ? item.content : []).map((part: unknown) => {
        if (isRecord(part) && part.type === "input_image") {
          return defined({
            type: "input_image",
            image: part.image_url ?? (part.file_id === undefined ? undefined : { id: part.file_id }),
            detail: part.detail,
          });
        }
        return { type: "input_text", text: isRecord(part) ? part.text : "" };
      });
      return { type: "message", role: "user", content: parts } as unknown as AgentInputItem;
    }
    switch (item.type) {
      case "function_call":
        return defined({
          type: "function_call",
          id: item.id,
          callId: item.call_id,
          name: item.name,
          arguments: item.arguments,
          status: item.status,
        }) as unknown as AgentInputItem;
      case "function_call_output":
        return {
          type: "function_call_result",
          callId: String(item.call_id),
          name: names.get(String(item.call_id)) ?? "",
          status: "completed",
          output: typeof item.output === "string" ? item.output : textOf(item.output),
        };
      case "reasoning":
        return defined({
          type: "reasoning",
          id: item.id,
          content: (Array.isArray(item.summary) ? item.summary : []).map((part: unknown) => ({
            type: "input_text",
            text: isRecord(part) ? part.text : "",
          })),
          providerData:
            item.encrypted_content === undefined
              ? undefined
              : { encryptedContent: item.encrypted_content },
        }) as unknown as AgentInputItem;
      default:
        return item as unknown as AgentInputItem;
    }
  });
}

function digestOf(item: Item): string {
  return entryDigest({ items: [item], format: "responses" });
}

function counted(digests: readonly string[]): Map<string, number> {
  const counts = new Map<string, number>();
  for (const digest of digests) {
    counts.set(digest, (counts.get(digest) ?? 0) + 1);
  }
  return counts;
}

/** A list of items the session holds as a whole, and the digests written after it. */
class Anchor {
  readonly digests: string[];
  readonly writtenAfter = new Map<string, number>();

  constructor(digests: string[] = []) {
    this.digests = digests;
  }
}

/**
 * Which items of a model input the session holds, judged without asking the service.
 *
 * The SDK's model input is the history it read at the start of the run followed by the run's
 * items; from one call to the next it grows, and this SDK carries the filter's output forward
 * as the next call's start. So the input starts with one of three lists the session holds as a
 * whole: the input of the filter's previous call (`sent`), its output (`shown`) or what
 * `getItems` last returned (`served`); the longest one that matches is the anchor, and of what
 * follows it only what was not written since the anchor was taken is missing (counted, so a
 * message said twice is two items). An input that starts with none (the SDK rewrote its
 * history) is held against everything `served` and the writes after it hold. What an assembly
 * added (`injected`) is never missing: it is the service's.
 */
export class HeldItems {
  served = new Anchor();
  sent = new Anchor();
  shown = new Anchor();
  /** Digests the filter wrote before the SDK's own `addItems` delivered them. */
  readonly ahead = new Map<string, number>();
  /** Digests of what the filter's assemblies showed that the SDK's input did not hold: the
   * goal, world state and notices contextd adds, history it shortened. The SDK saves a filter's
   * output as the turn's items, so these come back through `addItems`; they are the service's,
   * never written. */
  readonly injected = new Set<string>();

  serve(items: readonly Item[]): void {
    this.served = new Anchor(items.map(digestOf));
  }

  send(items: readonly Item[]): void {
    this.sent = new Anchor(items.map(digestOf));
  }

  wrote(items: readonly Item[]): void {
    for (const digest of items.map(digestOf)) {
      for (const anchor of [this.served, this.sent, this.shown]) {
        anchor.writtenAfter.set(digest, (anchor.writtenAfter.get(digest) ?? 0) + 1);
      }
    }
  }

  missing(items: readonly Item[]): Item[] {
    const digests = items.map(digestOf);
    const matching = [this.sent, this.shown, this.served].filter((anchor) =>
      anchor.digests.every((digest, index) => digests[index] === digest),
    );
    let start = 0;
    let unclaimed: Map<string, number>;
    if (matching.length > 0) {
      const anchor = matching.reduce((longest, each) =>
        each.digests.length > longest.digests.length ? each : longest,
      );
      start = anchor.digests.length;
      unclaimed = new Map(anchor.writtenAfter);
    } else {
      unclaimed = counted(this.served.digests);
      for (const [digest, count] of this.served.writtenAfter) {
        unclaimed.set(digest, (unclaimed.get(digest) ?? 0) + count);
      }
    }
    const missing: Item[] = [];
    items.forEach((item, index) => {
      const digest = digests[index] ?? "";
      if (index < start || this.injected.has(digest)) {
        return;
      }
      const left = unclaimed.get(digest) ?? 0;
      if (left > 0) {
        unclaimed.set(digest, left - 1);
      } else {
        missing.push(item);
      }
    });
    return missing;
  }

  /** Notes what the filter gives the model (`shown`) and what of it its input (`input`) did
   * not hold. */
  show(shown: readonly Item[], input: readonly Item[]): void {
    this.shown = new Anchor(shown.map(digestOf));
    const held = counted(input.map(digestOf));
    for (const digest of shown.map(digestOf)) {
      const left = held.get(digest) ?? 0;
      if (left > 0) {
        held.set(digest, left - 1);
      } else {
        this.injected.add(digest);
      }
    }
  }

  /** `items` less those the filter already wrote ahead (each claimed once) and those an
   * assembly injected. */
  claim(items: readonly Item[]): Item[] {
    return items.filter((item) => {
      const digest = digestOf(item);
      if (this.injected.has(digest)) {
        return false;
      }
      const left = this.ahead.get(digest) ?? 0;
      if (left > 0) {
        this.ahead.set(digest, left - 1);
        return false;
      }
      return true;
    });
  }
}

function usageOf(usage: {
  inputTokens: number;
  outputTokens: number;
  inputTokensDetails?: Record<string, number> | Record<string, number>[] | undefined;
}): Usage {
  const details = usage.inputTokensDetails;
  const cached = (Array.isArray(details) ? details : details === undefined ? [] : [details])
    .map((each) => each.cached_tokens ?? 0)
    .reduce((sum, each) => sum + each, 0);
  return { inputTokens: usage.inputTokens, cachedTokens: cached, outputTokens: usage.outputTokens };
}

export interface ContextdSessionOptions extends ClientOptions {
  /** How the link assembles and compacts; `outputFormat` must be `responses` (the default). */
  link?: LinkOptions;
}

/**
 * The SDK's `Session` over contextd session `sessionId` (created with `link.session` on first
 * use if missing).
 */
export class ContextdSession implements Session {
  readonly sessionId: string;
  readonly client: ContextdClient;
  readonly link: ContextLink;
  readonly held = new HeldItems();

  constructor(sessionId: string, options: ContextdSessionOptions = {}) {
    const { link, ...clientOptions } = options;
    if ((link?.outputFormat ?? "responses") !== "responses") {
      throw new Error("the Agents SDK reads and writes Responses items: link.outputFormat");
    }
    this.sessionId = sessionId;
    this.client = new ContextdClient(clientOptions);
    this.link = new ContextLink(this.client, sessionId, link);
  }

  /** Releases the client's connection. */
  async close(): Promise<void> {
    await this.client.close();
  }

  /** Items kept in the log but not shown to the model (e.g. of an unknown type). */
  get excluded(): Schemas["ExcludedItem"][] {
    return this.link.excluded;
  }

  private async write(items: readonly Item[]): Promise<void> {
    // No key of ours: the client makes one per call, so its retries write the batch once.
    await this.link.append({ items: [...items], format: "responses" });
    this.held.wrote(items);
  }

  async getSessionId(): Promise<string> {
    return this.sessionId;
  }

  /**
   * The session's provider-ready history: the session-mode assembly as the SDK's items, goal
   * pinned first and last, pairing valid (not the raw log, which `client.iterItems` reads). It
   * never compacts; the filter does, before a model call. `limit` keeps the latest items (the
   * goal and world state messages included).
   */
  async getItems(limit?: number): Promise<AgentInputItem[]> {
    const assembly = await this.link.assemble();
    const items = toAgentItems(assembly.messages as Item[]);
    this.held.serve(items.map(toResponsesItem));
    return limit === undefined ? items : items.slice(Math.max(0, items.length - limit));
  }

  /** Appends `items` as one atomic batch (less those the filter already wrote). An item the
   * service does not know is kept in the log and lands in `excluded`. */
  async addItems(items: AgentInputItem[]): Promise<void> {
    const fresh = this.held.claim(items.map(toResponsesItem));
    if (fresh.length > 0) {
      await this.write(fresh);
    }
  }

  /**
   * Hides the newest item the active history shows and returns it as logged; undefined when
   * the active history shows none. Pairing holds: popping an output hides its call (and the
   * call's other outputs) too, popping a call hides its outputs. The raw log keeps all.
   */
  async popItem(): Promise<AgentInputItem | undefined> {
    await this.link.ensureSession();
    let answer: Schemas["RetractionResponse"];
    try {
      answer = await this.client.retract(this.sessionId, {});
    } catch (error) {
      if (error instanceof Conflict && error.body.code === "nothing_to_retract") {
        return undefined;
      }
      throw error;
    }
    // The answer lists what it hid in seq order; the newest is the one asked for.
    return toAgentItems(answer.items.map((each) => each.item)).at(-1);
  }

  /** Starts the active history empty; the goal, world state and raw log stay. */
  async clearSession(): Promise<void> {
    await this.link.ensureSession();
    await this.client.reset(this.sessionId);
  }

  /**
   * For `run(agent, input, { callModelInputFilter: session.callModelInputFilter })`: appends
   * the items of the model input the session lacks (see `HeldItems`), then replaces the input
   * with the session-mode assembly (compacting first when advised). The agent's instructions
   * stay as they are.
   */
  readonly callModelInputFilter = async (
    args: CallModelInputFilterArgs<unknown>,
  ): Promise<ModelInputData> => {
    const items = args.modelData.input.map(toResponsesItem);
    const missing = this.held.missing(items);
    if (missing.length > 0) {
      await this.write(missing);
      for (const digest of missing.map(digestOf)) {
        this.held.ahead.set(digest, (this.held.ahead.get(digest) ?? 0) + 1);
      }
    }
    this.held.send(items);
    const assembly = await this.link.context();
    const shown = toAgentItems(assembly.messages as Item[]);
    this.held.show(shown.map(toResponsesItem), items);
    return {
      input: shown,
      ...(args.modelData.instructions === undefined
        ? {}
        : { instructions: args.modelData.instructions }),
    };
  };

  /**
   * The recall tool for the agent's `tools`, reading back from this session what the context
   * shows shortened or not at all. Name, description and parameters are the service's; the
   * output is the service's text, or its reason for refusing the arguments (never a throw).
   */
  recallTool(): FunctionTool {
    // Built as the SDK's function tool shape rather than with `tool()`, which would parse the
    // arguments first: the link answers arguments that are no JSON object too.
    return {
      type: "function",
      name: RECALL_TOOL_NAME,
      description: RECALL_TOOL_DESCRIPTION,
      parameters: recallToolParameters() as unknown as FunctionTool["parameters"],
      strict: false,
      invoke: async (_context, input: string) => this.link.recall(input),
      needsApproval: async () => false,
      isEnabled: async () => true,
    };
  }

  /** Reports one model call's usage against the filter's assembly for that call. */
  async reportUsage(usage: ModelResponse["usage"]): Promise<void> {
    await this.link.report(usageOf(usage));
  }

  /** `model` reporting each response's usage to this session as soon as it arrives. */
  withUsage(model: Model): Model {
    const report = (usage: ModelResponse["usage"]) => this.reportUsage(usage);
    return {
      async getResponse(request: ModelRequest): Promise<ModelResponse> {
        const response = await model.getResponse(request);
        await report(response.usage);
        return response;
      },
      async *getStreamedResponse(request: ModelRequest): AsyncIterable<StreamEvent> {
        for await (const event of model.getStreamedResponse(request)) {
          if (event.type === "response_done") {
            await report(event.response.usage as ModelResponse["usage"]);
          }
          yield event;
        }
      },
    };
  }
}
