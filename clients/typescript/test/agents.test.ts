/**
 * The OpenAI Agents JS adapter driving the SDK's own agent loop (`Runner.run`, streamed and not)
 * with a scripted model replaying a real trajectory, against the suite's server: each call's
 * whole model input is held against the stored assembly, the raw log against the run's items,
 * the usage counters against what the model reported, and a recall against the service.
 */

import {
  Agent,
  type AgentInputItem,
  type FunctionTool,
  type Model,
  type ModelRequest,
  type ModelResponse,
  Runner,
  type StreamEvent,
  Usage,
} from "@openai/agents-core";
import { describe, expect, test } from "vitest";

import { ContextdSession, toAgentItems, toResponsesItem } from "../src/agents.js";
import { type Item, RECALL_TOOL_NAME } from "../src/index.js";
import { adapterOptions, sessionId } from "./helpers.js";
import {
  GOAL,
  loadScript,
  OVERHEAD,
  responsesPairingHolds,
  type Script,
  SMALL_WINDOW,
  usageCounters,
} from "./script.js";

function contextdSession(
  id: string,
  options: { unit?: string; contextWindow?: number } = {},
): ContextdSession {
  return new ContextdSession(id, adapterOptions(options));
}

async function setGoal(session: ContextdSession, goal = GOAL): Promise<void> {
  await session.link.ensureSession();
  await session.client.putGoal(session.sessionId, { text: goal });
}

/** The raw log's items, without the service's own facts (goal, compaction, retraction). */
async function loggedItems(session: ContextdSession): Promise<Item[]> {
  const items: Item[] = [];
  for await (const each of session.client.iterItems(session.sessionId)) {
    if (!each.type.startsWith("contextd.")) {
      items.push(each.item);
    }
  }
  return items;
}

/** What a finished run (streamed or not) shows of itself. */
interface Outcome {
  finalOutput?: unknown;
  newItems: { rawItem?: unknown }[];
}

/** What the run added, as the adapter writes the SDK's items: the prompt, then every item the
 * run generated. */
function itemsOfRun(prompt: string, result: Outcome): Item[] {
  return [
    toResponsesItem({ type: "message", role: "user", content: prompt }),
    ...result.newItems.map((each) => toResponsesItem(each.rawItem as AgentInputItem)),
  ];
}

/** A recorded run replayed through the SDK's loop: each model call answers with the turn's
 * text and calls and reports the assembled tokens plus `OVERHEAD` (with the assembly's
 * predicted prefix as cached), noting the assembly it was given. */
class Replay implements Model {
  readonly inputs: AgentInputItem[][] = [];
  readonly assemblyIds: string[] = [];
  readonly compactionsBefore: number[] = [];
  readonly usages: { input: number; cached: number; output: number }[] = [];
  private turn = 0;

  constructor(
    readonly session: ContextdSession,
    readonly script: Script,
  ) {}

  answer(request: ModelRequest): ModelResponse {
    const assembly = this.session.link.lastAssembly;
    if (assembly === null) {
      throw new Error("the filter did not run");
    }
    this.inputs.push(typeof request.input === "string" ? [] : request.input);
    this.assemblyIds.push(assembly.assembly_id);
    this.compactionsBefore.push(this.session.link.compactions.length);
    const turn = this.script.turns[this.turn];
    this.turn += 1;
    if (turn === undefined) {
      throw new Error("the script has no more turns");
    }
    const output: ModelResponse["output"] = [];
    if (turn.text !== "") {
      output.push({
        type: "message",
        role: "assistant",
        id: `msg-${this.turn}`,
        status: "completed",
        content: [{ type: "output_text", text: turn.text }],
      });
    }
    for (const call of turn.calls) {
      output.push({
        type: "function_call",
        callId: call.call_id,
        name: call.name,
        arguments: call.arguments,
        status: "completed",
      });
    }
    const usage = {
      input: assembly.total_tokens + OVERHEAD,
      cached: assembly.cache.reused_prefix_tokens,
      output: Math.floor(turn.text.length / 4) + 10,
    };
    this.usages.push(usage);
    return {
      output,
      usage: new Usage({
        requests: 1,
        inputTokens: usage.input,
        outputTokens: usage.output,
        totalTokens: usage.input + usage.output,
        inputTokensDetails: { cached_tokens: usage.cached },
      }),
    };
  }

  async getResponse(request: ModelRequest): Promise<ModelResponse> {
    return this.answer(request);
  }

  async *getStreamedResponse(request: ModelRequest): AsyncIterable<StreamEvent> {
    const response = this.answer(request);
    yield {
      type: "response_done",
      response: {
        id: `resp-${this.turn}`,
        usage: {
          requests: 1,
          inputTokens: response.usage.inputTokens,
          outputTokens: response.usage.outputTokens,
          totalTokens: response.usage.totalTokens,
          inputTokensDetails: response.usage.inputTokensDetails[0] ?? {},
        },
        output: response.output as never,
      },
    };
  }

  agent(extraTools: FunctionTool[] = []): Agent {
    const tools: FunctionTool[] = this.script.toolNames.map((name) => ({
      type: "function",
      name,
      description: `The recorded run's ${name} tool.`,
      parameters: { type: "object", properties: {}, required: [], additionalProperties: true },
      strict: false,
      invoke: async (_context, _input, details) =>
        this.script.outputs.get(details?.toolCall?.callId ?? "") ?? "",
      needsApproval: async () => false,
      isEnabled: async () => true,
    }));
    return new Agent({
      name: "swe",
      instructions: this.script.instructions,
      model: this.session.withUsage(this),
      tools: [...tools, ...extraTools],
    });
  }

  async run({ streamed }: { streamed: boolean }): Promise<Outcome> {
    const runner = new Runner({
      tracingDisabled: true,
      callModelInputFilter: this.session.callModelInputFilter,
    });
    const options = { session: this.session, maxTurns: this.script.turns.length };
    if (!streamed) {
      return runner.run(this.agent(), this.script.prompt, options);
    }
    const result = await runner.run(this.agent(), this.script.prompt, { ...options, stream: true });
    for await (const _event of result) {
      // Drained: the run goes on as the events are read.
    }
    await result.completed;
    return result;
  }
}

async function storedInputs(session: ContextdSession, ids: string[]): Promise<AgentInputItem[][]> {
  const inputs: AgentInputItem[][] = [];
  for (const id of ids) {
    inputs.push(toAgentItems((await session.client.getAssembly(id)).response.messages as Item[]));
  }
  return inputs;
}

describe("OpenAI Agents JS adapter", () => {
  test.each([false, true])(
    "every model call gets its assembly and the session holds the run once (streamed: %s)",
    async (streamed) => {
      const session = contextdSession(sessionId("ts-agents"));
      await setGoal(session);
      const script = loadScript();
      const replay = new Replay(session, script);

      const result = await replay.run({ streamed });

      expect(replay.inputs).toEqual(await storedInputs(session, replay.assemblyIds));
      const goal = { type: "message", role: "system", content: `<goal version="1">\n${GOAL}\n</goal>` };
      expect(replay.inputs[0]).toEqual([goal, { type: "message", role: "user", content: script.prompt }]);
      for (const input of replay.inputs) {
        expect(input[0]).toEqual(goal);
        expect(responsesPairingHolds(input as unknown as Item[])).toBe(true);
      }
      expect(result.finalOutput).toBe(script.turns.at(-1)?.text);
      expect(await loggedItems(session)).toEqual(itemsOfRun(script.prompt, result));
    },
  );

  test("usage is reported against the assembly each call was given", async () => {
    const unit = `agents-js-usage-${sessionId("u")}`;
    const session = contextdSession(sessionId("ts-agents-usage"), { unit });
    await setGoal(session);
    const replay = new Replay(session, loadScript(4));
    const before = usageCounters(await session.client.metrics(), unit);

    await replay.run({ streamed: false });

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
    expect(tokenizer).toEqual({
      family: "openai",
      ratio: 1,
      overhead_tokens: OVERHEAD,
      calibrated: true,
      samples: replay.inputs.length,
      exact: true,
    });
  });

  test("a small window compacts when advised and the model gets the compacted context", async () => {
    const session = contextdSession(sessionId("ts-agents-compact"), { contextWindow: SMALL_WINDOW });
    await setGoal(session);
    const script = loadScript();
    const replay = new Replay(session, script);

    const result = await replay.run({ streamed: false });

    const compactions = session.link.compactions;
    expect(compactions.length).toBeGreaterThan(0);
    expect(compactions.map((each) => each.applied)).toEqual(compactions.map(() => true));
    expect((await session.client.getSession(session.sessionId)).compactions).toBe(compactions.length);
    expect(replay.inputs).toEqual(await storedInputs(session, replay.assemblyIds));
    const compacted = replay.inputs.filter(
      (_input, index) => (replay.compactionsBefore[index] ?? 0) > (replay.compactionsBefore[index - 1] ?? 0),
    );
    expect(compacted).toHaveLength(compactions.length);
    for (const input of compacted) {
      expect(JSON.stringify(input[1])).toContain("[contextd:summary]");
      expect(responsesPairingHolds(input as unknown as Item[])).toBe(true);
    }
    // Compaction hid history from the model, never from the log.
    expect(await loggedItems(session)).toEqual(itemsOfRun(script.prompt, result));
  });

  test("the recall tool reads back an output compaction cleared", async () => {
    const session = contextdSession(sessionId("ts-agents-recall"));
    await setGoal(session);
    const earlier: Item[] = [
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
    ];
    await session.client.appendItems(session.sessionId, { items: earlier });
    await session.client.compact({
      session_id: session.sessionId,
      strategy: "clear_tool_results",
      params: { keep_recent: 0 },
    });
    const script: Script = {
      instructions: "You are a careful engineer.",
      prompt: "Which test failed in the earlier run, and how?",
      turns: [
        {
          text: "Searching the cleared output.",
          calls: [{ call_id: "recall-1", name: RECALL_TOOL_NAME, arguments: "" }],
        },
        { text: "test_timedelta_rounds: 344 != 345.", calls: [] },
      ],
      outputs: new Map(),
      toolNames: [],
    };
    const replay = new Replay(session, script);
    const seen = replay.answer.bind(replay);
    // The model finds the cleared output's seq in the placeholder it is shown.
    (replay as unknown as { answer: typeof seen }).answer = (request) => {
      const named = /the full output is fact seq (\d+)/.exec(JSON.stringify(request.input));
      const first = script.turns[0]?.calls[0];
      if (named !== null && first !== undefined && first.arguments === "") {
        first.arguments = JSON.stringify({ seq: Number(named[1]), pattern: "FAILED|^E " });
      }
      return seen(request);
    };
    const runner = new Runner({ tracingDisabled: true, callModelInputFilter: session.callModelInputFilter });

    await runner.run(replay.agent([session.recallTool()]), script.prompt, { session, maxTurns: 2 });

    const call = JSON.parse(script.turns[0]?.calls[0]?.arguments ?? "{}") as { seq: number };
    const expected = (
      await session.client.recall(session.sessionId, { seq: call.seq, pattern: "FAILED|^E " })
    ).tool_output;
    expect(expected).toContain("test_timedelta_rounds FAILED");
    const answered = replay.inputs[1]?.find(
      (item) => item.type === "function_call_result" && item.callId === "recall-1",
    );
    expect(answered).toMatchObject({ type: "function_call_result", output: expected });
    expect((await loggedItems(session)).at(-2)).toEqual({
      type: "function_call_output",
      call_id: "recall-1",
      output: expected,
    });
  });

  test("pop and clear are the retraction and reset facts", async () => {
    const session = contextdSession(sessionId("ts-agents-pop"));
    expect(await session.popItem()).toBeUndefined();
    await session.addItems([
      { type: "message", role: "user", content: "list the files" },
      { type: "function_call", callId: "c1", name: "shell", arguments: "{}", status: "completed" },
      { type: "function_call_result", callId: "c1", name: "shell", status: "completed", output: "a.py" },
    ]);
    expect(await session.popItem()).toEqual({
      type: "function_call_result",
      callId: "c1",
      name: "shell",
      status: "completed",
      output: "a.py",
    });
    expect(await session.getItems()).toEqual([{ type: "message", role: "user", content: "list the files" }]);
    await session.clearSession();
    expect(await session.getItems()).toEqual([]);
    const kinds = [];
    for await (const each of session.client.iterItems(session.sessionId)) {
      kinds.push(each.type);
    }
    expect(kinds).toEqual([
      "message",
      "function_call",
      "function_call_output",
      "contextd.retraction",
      "contextd.reset",
    ]);
  });
});
