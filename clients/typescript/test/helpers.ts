/** What the test files share: a client on the suite's server, fresh session ids, small item
 * builders (Responses form), and a read of the raw log. */

import { randomUUID } from "node:crypto";
import { inject } from "vitest";

import { ContextdClient, type Item } from "../src/index.js";

export function server(): { baseUrl: string; apiKey: string } {
  return inject("contextd");
}

/** Options of an adapter session on the suite's server: the link's unit and the session's
 * model and window, each only when given. */
export function adapterOptions({
  unit,
  contextWindow,
}: { unit?: string; contextWindow?: number } = {}): {
  baseUrl: string;
  apiKey: string;
  link: { unit?: string; session: { model: string; context_window?: number } };
} {
  return {
    ...server(),
    link: {
      ...(unit === undefined ? {} : { unit }),
      session: {
        model: "gpt-4o",
        ...(contextWindow === undefined ? {} : { context_window: contextWindow }),
      },
    },
  };
}

export function client(): ContextdClient {
  const { baseUrl, apiKey } = server();
  return new ContextdClient({ baseUrl, apiKey });
}

export function sessionId(prefix: string): string {
  return `${prefix}-${randomUUID().slice(0, 12)}`;
}

export const userMsg = (text: string): Item => ({
  type: "message",
  role: "user",
  content: [{ type: "input_text", text }],
});

export const assistantMsg = (text: string): Item => ({
  type: "message",
  role: "assistant",
  content: [{ type: "output_text", text }],
});

export const toolCall = (callId: string, name = "shell", args = "{}"): Item => ({
  type: "function_call",
  call_id: callId,
  name,
  arguments: args,
});

export const toolOutput = (callId: string, output: string): Item => ({
  type: "function_call_output",
  call_id: callId,
  output,
});

/** The raw log's entries (item, type), every page. */
export async function rawLog(
  ctx: ContextdClient,
  id: string,
): Promise<{ type: string; item: Item }[]> {
  const logged: { type: string; item: Item }[] = [];
  for await (const each of ctx.iterItems(id, { pageSize: 50 })) {
    logged.push({ type: each.type, item: each.item });
  }
  return logged;
}
