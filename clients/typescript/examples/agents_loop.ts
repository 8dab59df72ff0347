/**
 * An OpenAI Agents JS agent on contextd, offline: a scripted model (no provider, no key) plays
 * an engineer fixing a port parser in a small made-up repository through three tools, while
 * `ContextdSession` keeps the run in a contextd session and its model-input filter hands the
 * model the assembled context. The same run as the Python example
 * `examples/agents_sdk_loop.py`, turn for turn.
 *
 * Start the service (`make run`), then, in clients/typescript, run
 * `npx tsx examples/agents_loop.ts`. `CONTEXTD_URL` (default http://127.0.0.1:8000) and
 * `CONTEXTD_API_KEY` say where and as whom. Each turn prints the assembly the model was given,
 * its exact tokens, the usage the model reported, and whether compaction fired first: the
 * session's window is kept small so that it does mid-run, clearing old tool outputs, then
 * (once clearing frees too little) summarizing, the strategy the service recommends. Late in
 * the run the model wants the first test run's failure back. Its context no longer shows it, but
 * names what it left out by fact seq, so the model searches those facts with the recall tool
 * (`session.recallTool()`) and answers with what it read, printed as `recalled`.
 */

import { randomUUID } from "node:crypto";
import {
  Agent,
  type AgentInputItem,
  type Model,
  type ModelRequest,
  type ModelResponse,
  Runner,
  type StreamEvent,
  tool,
  Usage,
} from "@openai/agents-core";
import { z } from "zod";

import { ContextdSession } from "../src/agents.js";
import { RECALL_TOOL_NAME } from "../src/index.js";

const GOAL = "Make parse_port(' 8080\\n') return 8080, and keep every config test passing.";
const TASK = "Our service refuses PORT values read from a file. tests/test_config.py shows it.";
const INSTRUCTIONS = "You are a careful engineer. Say what you look for before each tool call.";
/** A window this run outgrows after a few tool outputs, so that compaction is advised. */
const WINDOW = 4_000;

const CASES = Array.from({ length: 40 }, (_, n) => `test_parse_port_accepts_${1024 + n}`);
const REPOSITORY: Record<string, string> = {
  "src/config.py":
    "def parse_port(text: str) -> int:\n" +
    "    if not text.isdigit():\n" +
    "        raise ValueError(f'not a port: {text!r}')\n" +
    "    return int(text)\n",
  "tests/test_config.py":
    CASES.map(
      (name) => `def ${name}():\n    assert parse_port('${name.slice(-4)}') == ${name.slice(-4)}\n\n`,
    ).join("") +
    "def test_parse_port_strips_whitespace():\n    assert parse_port(' 8080\\n') == 8080\n",
};

function runTests(path: string): string {
  const passed = CASES.map((name) => `${path}::${name} PASSED\n`).join("");
  if (REPOSITORY["src/config.py"]?.includes(".strip()")) {
    return `${passed}${path}::test_parse_port_strips_whitespace PASSED\n${CASES.length + 1} passed`;
  }
  return (
    `${passed}${path}::test_parse_port_strips_whitespace FAILED\n` +
    "E   ValueError: not a port: ' 8080\\n'\n" +
    `1 failed, ${CASES.length} passed`
  );
}

function readFile(path: string): string {
  return REPOSITORY[path] ?? `no such file: ${path}`;
}

function editFile(path: string, search: string, replace: string): string {
  const text = REPOSITORY[path] ?? "";
  if (!text.includes(search)) {
    return `not found in ${path}: ${search}`;
  }
  REPOSITORY[path] = text.replace(search, replace);
  return `edited ${path}`;
}

const TOOLS = [
  tool({
    name: "run_tests",
    description: "Runs the tests in `path` and returns pytest's output.",
    parameters: z.object({ path: z.string() }),
    execute: ({ path }) => runTests(path),
  }),
  tool({
    name: "read_file",
    description: "Returns the file at `path`.",
    parameters: z.object({ path: z.string() }),
    execute: ({ path }) => readFile(path),
  }),
  tool({
    name: "edit_file",
    description: "Replaces `search` by `replace` in the file at `path`.",
    parameters: z.object({ path: z.string(), search: z.string(), replace: z.string() }),
    execute: ({ path, search, replace }) => editFile(path, search, replace),
  }),
];

/** One answer of the scripted model: what it says, and the tools it calls with what. */
interface Turn {
  text: string;
  calls: [string, Record<string, string | number>][];
}

const TURNS: Turn[] = [
  { text: "First the failure itself.", calls: [["run_tests", { path: "tests/test_config.py" }]] },
  {
    text: "The parser is the suspect; let me read it.",
    calls: [["read_file", { path: "src/config.py" }]],
  },
  {
    text: "isdigit() is False for ' 8080\\n': the text must be stripped before it is checked.",
    calls: [
      [
        "edit_file",
        {
          path: "src/config.py",
          search: "def parse_port(text: str) -> int:\n",
          replace: "def parse_port(text: str) -> int:\n    text = text.strip()\n",
        },
      ],
    ],
  },
  { text: "The suite again.", calls: [["run_tests", { path: "tests/test_config.py" }]] },
  {
    text: "And the tests themselves, to be sure.",
    calls: [["read_file", { path: "tests/test_config.py" }]],
  },
  {
    text: "The first run's failure is no longer in my context: searching what it left out.",
    calls: [[RECALL_TOOL_NAME, { pattern: " FAILED$|^E " }]],
  },
  {
    text:
      "Fixed: parse_port strips the text first, so {test}, which failed with {error}, passes" +
      " now, as does every other config test.",
    calls: [],
  },
];
const RECALL = "call-6-1";
const NAMED = /fact seqs? (\d+)(?:–(\d+))?/g;

/** The span of facts the context names as shortened or left out ("fact seq 5", "fact seqs
 * 2–14"), as the recall tool's `from_seq` and `to_seq`. */
function leftOut(received: AgentInputItem[]): { from_seq: number; to_seq: number } {
  const seqs = [...JSON.stringify(received).matchAll(NAMED)].flatMap((found) =>
    found.slice(1).filter((seq) => seq !== undefined).map(Number),
  );
  if (seqs.length === 0) {
    throw new Error("compaction was to have left the first test run out by now");
  }
  return { from_seq: Math.min(...seqs), to_seq: Math.max(...seqs) };
}

/** The failing test and its error, as the recall's output listed them. */
function failureOf(received: AgentInputItem[]): { test: string; error: string } {
  const recalled = received.find(
    (item) => item.type === "function_call_result" && item.callId === RECALL,
  );
  const output =
    recalled?.type === "function_call_result" && typeof recalled.output === "string"
      ? recalled.output
      : "";
  const test = /::(\w+) FAILED$/m.exec(output);
  const error = /\bE {2,}(.+)$/m.exec(output);
  if (test?.[1] === undefined || error?.[1] === undefined) {
    throw new Error(`the recall did not find the failure: ${JSON.stringify(output)}`);
  }
  return { test: test[1], error: error[1] };
}

/** The engineer, scripted: each call answers the next turn, with the usage a provider would
 * report (estimated from the characters it received, about four per token). */
class ScriptedEngineer implements Model {
  private turn = 0;

  async getResponse(request: ModelRequest): Promise<ModelResponse> {
    const index = this.turn;
    this.turn += 1;
    const turn = TURNS[index];
    if (turn === undefined) {
      throw new Error("the script has no more turns");
    }
    const input = typeof request.input === "string" ? [] : request.input;
    let text = turn.text;
    if (text.includes("{test}")) {
      const failure = failureOf(input);
      console.log(`recalled: ${failure.test} failed with ${failure.error}`);
      text = text.replace("{test}", failure.test).replace("{error}", failure.error);
    }
    const output: ModelResponse["output"] = [
      {
        type: "message",
        role: "assistant",
        id: `msg-${index + 1}`,
        status: "completed",
        content: [{ type: "output_text", text }],
      },
    ];
    turn.calls.forEach(([name, args], number) => {
      const given = name === RECALL_TOOL_NAME ? { ...leftOut(input), ...args } : args;
      output.push({
        type: "function_call",
        callId: `call-${index + 1}-${number + 1}`,
        name,
        arguments: JSON.stringify(given),
        status: "completed",
      });
    });
    const received = JSON.stringify(input).length + (request.systemInstructions ?? "").length;
    const inputTokens = Math.floor(received / 4);
    const outputTokens = Math.floor(text.length / 4);
    return {
      output,
      usage: new Usage({
        requests: 1,
        inputTokens,
        outputTokens,
        totalTokens: inputTokens + outputTokens,
      }),
    };
  }

  // eslint-disable-next-line require-yield
  async *getStreamedResponse(): AsyncIterable<StreamEvent> {
    throw new Error("this example runs without streaming");
  }
}

async function main(): Promise<void> {
  const sessionId = `agents-js-loop-${randomUUID().replaceAll("-", "").slice(0, 12)}`;
  const session = new ContextdSession(sessionId, {
    baseUrl: process.env.CONTEXTD_URL ?? "http://127.0.0.1:8000",
    ...(process.env.CONTEXTD_API_KEY === undefined ? {} : { apiKey: process.env.CONTEXTD_API_KEY }),
    // Old tool outputs are cleared first, each leaving a placeholder that names its seq.
    link: {
      compactStrategy: "clear_tool_results",
      session: { model: "gpt-4o", context_window: WINDOW },
    },
  });
  await session.link.ensureSession();
  await session.client.putGoal(sessionId, { text: GOAL });
  const model = new ScriptedEngineer();
  const reporting = session.withUsage(model);
  let turn = 0;
  let compactions = 0;
  const agent = new Agent({
    name: "engineer",
    instructions: INSTRUCTIONS,
    model: {
      getResponse: async (request) => {
        const response = await reporting.getResponse(request);
        const assembly = session.link.lastAssembly;
        turn += 1;
        // A compaction that would free too little writes nothing: count those that applied.
        const applied = session.link.compactions.filter((each) => each.applied).length;
        const fired = applied > compactions;
        compactions = applied;
        const calls = response.output.flatMap((item) =>
          item.type === "function_call" ? [item.name] : [],
        );
        const strategy = session.link.compactions.at(-1)?.strategy;
        console.log(
          `turn ${turn}: assembly ${assembly?.assembly_id}, ${assembly?.total_tokens} tokens ` +
            `assembled, ${response.usage.inputTokens} input tokens reported, compaction ` +
            `${fired ? `fired (${strategy})` : "no"} -> ${calls.join(", ") || "answers"}`,
        );
        return response;
      },
      getStreamedResponse: (request) => reporting.getStreamedResponse(request),
    },
    tools: [...TOOLS, session.recallTool()],
  });
  console.log(`session ${sessionId}`);
  const runner = new Runner({
    tracingDisabled: true,
    callModelInputFilter: session.callModelInputFilter,
  });
  const result = await runner.run(agent, TASK, { session, maxTurns: TURNS.length });
  const detail = await session.client.getSession(sessionId);
  console.log(`answer: ${result.finalOutput}`);
  console.log(
    `done: ${detail.item_count} items in the log, ${detail.compactions} compaction(s), ` +
      `${detail.active_tokens} tokens active`,
  );
  await session.close();
}

await main();
