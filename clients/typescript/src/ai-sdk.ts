/**
 * The Vercel AI SDK (`ai` 6) on contextd: `ContextdAISession.prepareStep` hands every step of a
 * `generateText`/`streamText` loop the session's assembled context instead of the loop's
 * messages, `onStepFinish` reports each step's usage, `tools()` holds the recall tool, and
 * `generateText` wires all of it.
 *
 *     const session = new ContextdAISession("ticket-42", { baseUrl, apiKey });
 *     const result = await session.generateText({
 *       model, system: "You are a careful engineer.", prompt: "tests/test_dates.py fails",
 *       tools: myTools, stopWhen: stepCountIs(20) });
 *
 * Invariants:
 *
 * - **The model sees the assembly, never the loop's list.** Before each step the loop's messages
 *   are recorded (`ContextLink.record`: one message, one append, keyed by position and content),
 *   then the step's messages are replaced by the session-mode assembly of that step (compacted
 *   first when advised), in `chat` form, converted to the SDK's messages.
 * - **One system prompt, first.** The caller's `system` comes first, followed by contextd's
 *   leading developer messages (goal, rules, world state), all as the step's `system`; developer
 *   messages later in the context (the restated goal, notices) reach the model as user messages,
 *   since several providers refuse a system message mid-list. The caller's `system` is sent
 *   with every step and never logged.
 * - **Messages are Chat Completions messages in the log.** An assistant message's tool calls
 *   become `tool_calls`, a tool message's results one `tool` message each. Reasoning parts are
 *   not written (Chat Completions has no form for them). A message with a part of no Chat form
 *   (a file) is kept as an unknown item `ai-sdk:<role>` holding the message: in the log,
 *   reported in `excluded`, never shown to the model.
 * - **Usage goes against the assembly the step was given**, from the step's `usage`
 *   (`inputTokens`, `inputTokenDetails.cacheReadTokens`, `outputTokens`).
 * - **The final answer is logged too**: `generateText` records the loop's messages once more
 *   when it ends. (With the pieces alone, record `result.response.messages` yourself.)
 * - **The model can read back what its context leaves out**: `tools()` holds the service's
 *   recall tool (`context_recall`, its own definition) as an AI SDK tool run against this
 *   session; its call and result are loop messages, mirrored like any other.
 *
 * One `ContextdAISession` serves one loop at a time.
 */

import {
  generateText,
  jsonSchema,
  type ModelMessage,
  type PrepareStepFunction,
  type StepResult,
  type SystemModelMessage,
  tool,
  type ToolSet,
} from "ai";

import { ContextdClient, type ClientOptions, type Item, type Schemas } from "./client.js";
import { RECALL_TOOL_DESCRIPTION, RECALL_TOOL_NAME, recallToolParameters } from "./recall.js";
import { ContextLink, type Entry, type LinkOptions } from "./runtime.js";

/** The service refuses a longer item `type` (422), which would make an odd message throw. */
const MAX_ITEM_TYPE = 64;

type Part = Record<string, unknown>;

function partsOf(content: unknown): Part[] {
  return Array.isArray(content)
    ? content.filter((part): part is Part => typeof part === "object" && part !== null)
    : [];
}

function textOfChat(content: unknown): string {
  return typeof content === "string"
    ? content
    : partsOf(content)
        .map((part) => (typeof part.text === "string" ? part.text : ""))
        .join("");
}

function resultText(output: unknown): string {
  const result = (output ?? {}) as { type?: string; value?: unknown };
  switch (result.type) {
    case "text":
    case "error-text":
      return String(result.value);
    case "content":
      return partsOf(result.value)
        .map((part) => (typeof part.text === "string" ? part.text : ""))
        .join("");
    default:
      return JSON.stringify(result.value ?? null);
  }
}

/** The Chat Completions messages of one of the SDK's messages, or null when a part has none. */
function chatMessages(message: ModelMessage): Item[] | null {
  switch (message.role) {
    case "system":
      return [{ role: "system", content: message.content }];
    case "user": {
      if (typeof message.content === "string") {
        return [{ role: "user", content: message.content }];
      }
      const parts: Item[] = [];
      for (const part of message.content) {
        if (part.type === "text") {
          parts.push({ type: "text", text: part.text });
        } else if (part.type === "image" && (typeof part.image === "string" || part.image instanceof URL)) {
          parts.push({ type: "image_url", image_url: { url: String(part.image) } });
        } else {
          return null;
        }
      }
      return [{ role: "user", content: parts }];
    }
    case "assistant": {
      if (typeof message.content === "string") {
        return [{ role: "assistant", content: message.content }];
      }
      let text = "";
      const calls: Item[] = [];
      for (const part of message.content) {
        if (part.type === "text") {
          text += part.text;
        } else if (part.type === "tool-call") {
          calls.push({
            id: part.toolCallId,
            type: "function",
            function: { name: part.toolName, arguments: JSON.stringify(part.input ?? {}) },
          });
        } else if (part.type !== "reasoning") {
          return null;
        }
      }
      return [
        calls.length === 0
          ? { role: "assistant", content: text }
          : { role: "assistant", content: text === "" ? null : text, tool_calls: calls },
      ];
    }
    case "tool": {
      const results: Item[] = [];
      for (const part of message.content) {
        if (part.type !== "tool-result") {
          return null;
        }
        results.push({ role: "tool", tool_call_id: part.toolCallId, content: resultText(part.output) });
      }
      return results;
    }
  }
}

/** One entry per message: its Chat form, or an unknown Responses item holding it. */
export function entriesOf(messages: readonly ModelMessage[]): Entry[] {
  return messages.map((message) => {
    const chat = chatMessages(message);
    if (chat !== null) {
      return { items: chat, format: "chat" };
    }
    const unknown = { type: `ai-sdk:${message.role}`.slice(0, MAX_ITEM_TYPE), message };
    return { items: [JSON.parse(JSON.stringify(unknown)) as Item], format: "responses" };
  });
}

function parsedArguments(text: unknown): unknown {
  try {
    return JSON.parse(String(text));
  } catch {
    return String(text);
  }
}

/**
 * An assembly's messages in `chat` form as the step's system messages (the leading developer
 * and system messages, after `system`) and the SDK's messages (the rest; later developer
 * messages as user messages). A tool result takes its tool name from the call before it.
 */
export function stepInput(
  context: readonly Item[],
  system?: string,
): { system: SystemModelMessage[]; messages: ModelMessage[] } {
  const leading = context.findIndex((each) => each.role !== "system" && each.role !== "developer");
  const cut = leading === -1 ? context.length : leading;
  const systemMessages: SystemModelMessage[] = [
    ...(system === undefined ? [] : [system]),
    ...context.slice(0, cut).map((each) => textOfChat(each.content)),
  ].map((content) => ({ role: "system", content }));
  const names = new Map<string, string>();
  const messages: ModelMessage[] = [];
  for (const each of context.slice(cut)) {
    switch (each.role) {
      case "system":
      case "developer":
        messages.push({ role: "user", content: textOfChat(each.content) });
        break;
      case "user":
        messages.push(
          typeof each.content === "string"
            ? { role: "user", content: each.content }
            : {
                role: "user",
                content: partsOf(each.content).map((part) =>
                  part.type === "image_url"
                    ? { type: "image", image: String((part.image_url as { url?: unknown }).url) }
                    : { type: "text", text: String(part.text ?? "") },
                ),
              },
        );
        break;
      case "assistant": {
        const calls = partsOf(each.tool_calls).map((call) => {
          const fn = (call.function ?? {}) as { name?: unknown; arguments?: unknown };
          names.set(String(call.id), String(fn.name));
          return {
            type: "tool-call" as const,
            toolCallId: String(call.id),
            toolName: String(fn.name),
            input: parsedArguments(fn.arguments),
          };
        });
        const text = textOfChat(each.content);
        messages.push({
          role: "assistant",
          content: [...(text === "" ? [] : [{ type: "text" as const, text }]), ...calls],
        });
        break;
      }
      case "tool": {
        const result = {
          type: "tool-result" as const,
          toolCallId: String(each.tool_call_id),
          toolName: names.get(String(each.tool_call_id)) ?? "",
          output: { type: "text" as const, value: textOfChat(each.content) },
        };
        const previous = messages.at(-1);
        if (previous?.role === "tool") {
          previous.content.push(result);
        } else {
          messages.push({ role: "tool", content: [result] });
        }
        break;
      }
      default:
        messages.push({ role: "user", content: JSON.stringify(each) });
    }
  }
  return { system: systemMessages, messages };
}

export interface ContextdAISessionOptions extends ClientOptions {
  /** How the link assembles and compacts (its output format is always `chat`). */
  link?: Omit<LinkOptions, "outputFormat">;
}

type GenerateTextOptions = Parameters<typeof generateText<ToolSet>>[0];

/** A contextd session seen from an AI SDK loop. */
export class ContextdAISession {
  readonly sessionId: string;
  readonly client: ContextdClient;
  readonly link: ContextLink;

  constructor(sessionId: string, options: ContextdAISessionOptions = {}) {
    const { link, ...clientOptions } = options;
    this.sessionId = sessionId;
    this.client = new ContextdClient(clientOptions);
    this.link = new ContextLink(this.client, sessionId, { ...link, outputFormat: "chat" });
  }

  /** Releases the client's connection. */
  async close(): Promise<void> {
    await this.client.close();
  }

  /** Items kept in the log but not shown to the model. */
  get excluded(): Schemas["ExcludedItem"][] {
    return this.link.excluded;
  }

  /** Appends the loop's messages the session does not hold yet. */
  async record(messages: readonly ModelMessage[]): Promise<void> {
    await this.link.record(entriesOf(messages));
  }

  /** For `generateText`/`streamText`'s `prepareStep`: records the step's messages, then gives
   * the step the assembly (`system` first). */
  prepareStep(system?: string): PrepareStepFunction {
    return async ({ messages }) => {
      await this.record(messages);
      const assembly = await this.link.context();
      return stepInput(assembly.messages as Item[], system);
    };
  }

  /** For `onStepFinish`: reports the step's usage against the assembly it was given. */
  readonly onStepFinish = async (step: StepResult<ToolSet>): Promise<void> => {
    await this.link.report({
      inputTokens: step.usage.inputTokens ?? 0,
      cachedTokens: step.usage.inputTokenDetails?.cacheReadTokens ?? 0,
      outputTokens: step.usage.outputTokens ?? 0,
    });
  };

  /** The recall tool under its own name, for the loop's `tools`. */
  tools(): ToolSet {
    return {
      [RECALL_TOOL_NAME]: tool({
        description: RECALL_TOOL_DESCRIPTION,
        inputSchema: jsonSchema<Record<string, unknown>>(
          recallToolParameters() as unknown as Parameters<typeof jsonSchema>[0],
        ),
        execute: async (input: unknown) => this.link.recall(input),
      }),
    };
  }

  /**
   * `generateText` on this session: the recall tool beside `tools`, the step preparation and
   * usage reports wired in (after any `onStepFinish` of yours), and the whole conversation
   * recorded once the loop ends, so the final answer is logged.
   */
  async generateText(
    options: Omit<GenerateTextOptions, "prepareStep" | "prompt" | "messages" | "system"> & {
      system?: string;
      prompt?: string;
      messages?: ModelMessage[];
    },
  ): ReturnType<typeof generateText<ToolSet>> {
    const { system, prompt, messages, onStepFinish, tools, ...rest } = options;
    const conversation: ModelMessage[] =
      messages ?? (prompt === undefined ? [] : [{ role: "user", content: prompt }]);
    const result = await generateText<ToolSet>({
      ...rest,
      messages: conversation,
      tools: { ...tools, ...this.tools() } as ToolSet,
      prepareStep: this.prepareStep(system),
      onStepFinish: async (step) => {
        await onStepFinish?.(step);
        await this.onStepFinish(step);
      },
    });
    await this.record([...conversation, ...result.response.messages]);
    return result;
  }
}
