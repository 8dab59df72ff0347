/**
 * The Vercel AI SDK adapter driving the SDK's own loop (`generateText` with tools) with its mock
 * model replaying a real trajectory, against the suite's server: each step's whole prompt is
 * held against the stored assembly, the raw log against the loop's messages, the usage counters
 * against what the model reported, and a recall against the service.
 */

import type {
  LanguageModelV3CallOptions,
  LanguageModelV3Content,
  LanguageModelV3Prompt,
} from "@ai-sdk/provider";
import { type ModelMessage, stepCountIs, type ToolSet, jsonSchema, tool } from "ai";
import { MockLanguageModelV3 } from "ai/test";
import { describe, expect, test } from "vitest";

import { ContextdAISession, entriesOf } from "../src/ai-sdk.js";
import { type Item, RECALL_TOOL_NAME } from "../src/index.js";
import { adapterOptions, sessionId } from "./helpers.js";
import {
  GOAL,
  loadScript,
  OVERHEAD,
  type Script,
  SMALL_WINDOW,
  usageCounters,
} from "./script.js";

function aiSession(
  id: string,
  options: { unit?: string; contextWindow?: number } = {},
): ContextdAISession {
  return new ContextdAISession(id, adapterOptions(options));
}

/**
 * What the model should get for an assembly in `chat` form, written here apart from the
 * adapter: the instructions and the leading developer messages as system messages, later
 * developer messages as user text, tool calls with their parsed input, each tool message a
 * result named after its call.
 */
function expectedPrompt(context: Item[], instructions: string): LanguageModelV3Prompt {
  const text = (content: unknown): string =>
    typeof content === "string"
      ? content
      : (content as { text?: string }[]).map((part) => part.text ?? "").join("");
  const prompt: LanguageModelV3Prompt = [{ role: "system", content: instructions }];
  const names = new Map<string, string>();
  let leading = true;
  for (const message of context) {
    const role = message.role;
    if (leading && (role === "developer" || role === "system")) {
      prompt.push({ role: "system", content: text(message.content) });
      continue;
    }
    leading = false;
    if (role === "developer" || role === "system" || role === "user") {
      prompt.push({ role: "user", content: [{ type: "text", text: text(message.content) }] });
    } else if (role === "assistant") {
      const said = text(message.content ?? "");
      const calls = ((message.tool_calls ?? []) as { id: string; function: { name: string; arguments: string } }[]).map(
        (call) => {
          names.set(call.id, call.function.name);
          return {
            type: "tool-call" as const,
            toolCallId: call.id,
            toolName: call.function.name,
            input: JSON.parse(call.function.arguments) as unknown,
          };
        },
      );
      prompt.push({
        role: "assistant",
        content: [...(said === "" ? [] : [{ type: "text" as const, text: said }]), ...calls],
      });
    } else if (role === "tool") {
      const result = {
        type: "tool-result" as const,
        toolCallId: String(message.tool_call_id),
        toolName: names.get(String(message.tool_call_id)) ?? "",
        output: { type: "text" as const, value: text(message.content) },
      };
      const previous = prompt.at(-1);
      if (previous?.role === "tool") {
        previous.content.push(result);
      } else {
        prompt.push({ role: "tool", content: [result] });
      }
    }
  }
  return prompt;
}

/** The prompt without the provider options the SDK adds as `undefined`. */
function plain(prompt: LanguageModelV3Prompt): unknown {
  return JSON.parse(JSON.stringify(prompt));
}

/** A recorded run replayed through the SDK's loop by its mock model. */
class Replay {
  readonly assemblyIds: string[] = [];
  readonly compactionsBefore: number[] = [];
  readonly usages: { input: number; cached: number; output: number }[] = [];
  readonly model: MockLanguageModelV3;

  constructor(
    readonly session: ContextdAISession,
    readonly script: Script,
    respond?: (call: LanguageModelV3CallOptions, index: number) => void,
  ) {
    let index = 0;
    this.model = new MockLanguageModelV3({
      doGenerate: async (call) => {
        respond?.(call, index);
        const assembly = session.link.lastAssembly;
        if (assembly === null) {
          throw new Error("prepareStep did not run");
        }
        this.assemblyIds.push(assembly.assembly_id);
        this.compactionsBefore.push(session.link.compactions.length);
        const turn = script.turns[index];
        index += 1;
        if (turn === undefined) {
          throw new Error("the script has no more turns");
        }
        const content: LanguageModelV3Content[] = [];
        if (turn.text !== "") {
          content.push({ type: "text", text: turn.text });
        }
        for (const each of turn.calls) {
          content.push({ type: "tool-call", toolCallId: each.call_id, toolName: each.name, input: each.arguments });
        }
        const usage = {
          input: assembly.total_tokens + OVERHEAD,
          cached: assembly.cache.reused_prefix_tokens,
          output: Math.floor(turn.text.length / 4) + 10,
        };
        this.usages.push(usage);
        return {
          content,
          finishReason: { unified: turn.calls.length > 0 ? "tool-calls" : "stop", raw: undefined },
          usage: {
            inputTokens: {
              total: usage.input,
              noCache: usage.input - usage.cached,
              cacheRead: usage.cached,
              cacheWrite: 0,
            },
            outputTokens: { total: usage.output, text: usage.output, reasoning: 0 },
          },
          warnings: [],
        };
      },
    });
  }

  tools(): ToolSet {
    return Object.fromEntries(
      this.script.toolNames.map((name) => [
        name,
        tool({
          description: `The recorded run's ${name} tool.`,
          inputSchema: jsonSchema<Record<string, unknown>>({ type: "object", properties: {} }),
          execute: async (_input, { toolCallId }) => this.script.outputs.get(toolCallId) ?? "",
        }),
      ]),
    );
  }

  run() {
    return this.session.generateText({
      model: this.model,
      system: this.script.instructions,
      prompt: this.script.prompt,
      tools: this.tools(),
      stopWhen: stepCountIs(this.script.turns.length),
    });
  }

  async expectedPrompts(): Promise<unknown[]> {
    const prompts: unknown[] = [];
    for (const id of this.assemblyIds) {
      const stored = (await this.session.client.getAssembly(id)).response.messages as Item[];
      prompts.push(plain(expectedPrompt(stored, this.script.instructions)));
    }
    return prompts;
  }
}

/** The raw log as the adapter sent it: each Chat message once (the service keeps it as the
 * original of the items it became), and the unknown items. */
async function loggedAsSent(session: ContextdAISession): Promise<Item[]> {
  const logged: Item[] = [];
  for await (const each of session.client.iterItems(session.sessionId)) {
    const original = each.original as { message?: Item } | null;
    if (original?.message !== undefined) {
      logged.push(original.message);
    } else if (each.type.startsWith("ai-sdk:")) {
      logged.push(each.item);
    }
  }
  return logged;
}

function sentOf(prompt: string, responseMessages: ModelMessage[]): Item[] {
  return entriesOf([{ role: "user", content: prompt }, ...responseMessages]).flatMap(
    (entry) => entry.items,
  );
}

async function setGoal(session: ContextdAISession): Promise<void> {
  await session.link.ensureSession();
  await session.client.putGoal(session.sessionId, { text: GOAL });
}

describe("Vercel AI SDK adapter", () => {
  test("every step gets its assembly and the session holds the loop once", async () => {
    const session = aiSession(sessionId("ts-ai"));
    await setGoal(session);
    const script = loadScript();
    const replay = new Replay(session, script);

    const result = await replay.run();

    const prompts = replay.model.doGenerateCalls.map((call) => plain(call.prompt));
    expect(prompts).toEqual(await replay.expectedPrompts());
    expect(prompts[0]).toEqual([
      { role: "system", content: script.instructions },
      { role: "system", content: `<goal version="1">\n${GOAL}\n</goal>` },
      { role: "user", content: [{ type: "text", text: script.prompt }] },
    ]);
    expect(result.text).toBe(script.turns.at(-1)?.text);
    expect(await loggedAsSent(session)).toEqual(sentOf(script.prompt, result.response.messages));
    await session.close();
  });

  test("usage is reported against the assembly each step was given", async () => {
    const unit = `ai-sdk-usage-${sessionId("u")}`;
    const session = aiSession(sessionId("ts-ai-usage"), { unit });
    await setGoal(session);
    const replay = new Replay(session, loadScript(4));
    const before = usageCounters(await session.client.metrics(), unit);

    await replay.run();

    const after = usageCounters(await session.client.metrics(), unit);
    const sum = (pick: (usage: (typeof replay.usages)[number]) => number) =>
      replay.usages.map(pick).reduce((total, each) => total + each, 0);
    const cached = sum((usage) => usage.cached);
    expect(
      Object.fromEntries(Object.entries(after).map(([kind, value]) => [kind, value - (before[kind] ?? 0)])),
    ).toEqual({
      cached,
      uncached: sum((usage) => usage.input) - cached,
      output: sum((usage) => usage.output),
      contextd_cache_actual_tokens_total: cached,
      contextd_cache_predicted_tokens_total: cached,
      // Every report classified, each as predicted: no miss counted.
      contextd_cache_outcomes_total: replay.usages.length,
    });
    const { tokenizer } = await session.client.contextWindow(session.sessionId);
    expect([tokenizer.overhead_tokens, tokenizer.samples]).toEqual([OVERHEAD, replay.usages.length]);
    await session.close();
  });

  test("a small window compacts when advised and the model gets the compacted context", async () => {
    const session = aiSession(sessionId("ts-ai-compact"), { contextWindow: SMALL_WINDOW });
    await setGoal(session);
    const script = loadScript();
    const replay = new Replay(session, script);

    const result = await replay.run();

    const compactions = session.link.compactions;
    expect(compactions.length).toBeGreaterThan(0);
    expect(compactions.map((each) => each.applied)).toEqual(compactions.map(() => true));
    expect((await session.client.getSession(session.sessionId)).compactions).toBe(compactions.length);
    expect(replay.model.doGenerateCalls.map((call) => plain(call.prompt))).toEqual(
      await replay.expectedPrompts(),
    );
    const compacted = replay.model.doGenerateCalls.filter(
      (_call, index) => (replay.compactionsBefore[index] ?? 0) > (replay.compactionsBefore[index - 1] ?? 0),
    );
    expect(compacted).toHaveLength(compactions.length);
    for (const call of compacted) {
      expect(JSON.stringify(call.prompt)).toContain("[contextd:summary]");
    }
    expect(await loggedAsSent(session)).toEqual(sentOf(script.prompt, result.response.messages));
    await session.close();
  });

  test("the recall tool reads back an output compaction cleared", async () => {
    const session = aiSession(sessionId("ts-ai-recall"));
    await setGoal(session);
    await session.client.appendItems(session.sessionId, {
      items: [
        { type: "message", role: "user", content: "Run the field tests." },
        { type: "function_call", call_id: "earlier-1", name: "run_tests", arguments: "{}" },
        {
          type: "function_call_output",
          call_id: "earlier-1",
          output:
            Array.from({ length: 60 }, (_, n) => `tests/test_fields.py::test_case_${n} PASSED\n`).join("") +
            "tests/test_fields.py::test_timedelta_rounds FAILED\nE   assert 344 == 345\n1 failed, 60 passed",
        },
        { type: "message", role: "assistant", content: "One test fails." },
      ],
    });
    await session.client.compact({
      session_id: session.sessionId,
      strategy: "clear_tool_results",
      params: { keep_recent: 0 },
    });
    const script: Script = {
      instructions: "You are a careful engineer.",
      prompt: "Which test failed in the earlier run, and how?",
      turns: [
        { text: "Searching the cleared output.", calls: [{ call_id: "recall-1", name: RECALL_TOOL_NAME, arguments: "" }] },
        { text: "test_timedelta_rounds: 344 != 345.", calls: [] },
      ],
      outputs: new Map(),
      toolNames: [],
    };
    const replay = new Replay(session, script, (call, index) => {
      const named = /the full output is fact seq (\d+)/.exec(JSON.stringify(call.prompt));
      const first = script.turns[0]?.calls[0];
      if (index === 0 && named !== null && first !== undefined) {
        first.arguments = JSON.stringify({ seq: Number(named[1]), pattern: "FAILED|^E " });
      }
    });

    await replay.run();

    const asked = JSON.parse(script.turns[0]?.calls[0]?.arguments ?? "{}") as { seq: number };
    const expected = (
      await session.client.recall(session.sessionId, { seq: asked.seq, pattern: "FAILED|^E " })
    ).tool_output;
    expect(expected).toContain("test_timedelta_rounds FAILED");
    const answered = replay.model.doGenerateCalls[1]?.prompt
      .flatMap((message) => (message.role === "tool" ? message.content : []))
      .find((part) => part.type === "tool-result" && part.toolCallId === "recall-1");
    expect(answered).toMatchObject({ output: { type: "text", value: expected } });
    expect((await loggedAsSent(session)).at(-2)).toEqual({
      role: "tool",
      tool_call_id: "recall-1",
      content: expected,
    });
    await session.close();
  });
});
