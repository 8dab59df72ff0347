/**
 * A Vercel AI SDK loop on contextd, offline: the SDK's own mock model (`MockLanguageModelV3`
 * from `ai/test`; no provider, no key) plays an engineer fixing a port parser in a small
 * made-up repository through three tools, while `ContextdAISession` keeps the loop in a
 * contextd session and hands every step the assembled context (`prepareStep`). The same run as
 * `examples/agents_loop.ts`, turn for turn.
 *
 * Start the service (`make run`), then, in clients/typescript, run
 * `npx tsx examples/ai_sdk_loop.ts`. `CONTEXTD_URL` (default http://127.0.0.1:8000) and
 * `CONTEXTD_API_KEY` say where and as whom. Each step prints the assembly the model was given,
 * its exact tokens, the usage the model reported, and whether compaction fired first: the
 * session's window is kept small so that it does mid-run, clearing old tool outputs, then
 * (once clearing frees too little) summarizing, the strategy the service recommends. Late in
 * the run the model wants the first test run's failure back; its context names what it left out
 * by fact seq, so it searches those facts with the recall tool and answers with what it read,
 * printed as `recalled`.
 */

import { randomUUID } from "node:crypto";
import type { LanguageModelV3CallOptions, LanguageModelV3Content } from "@ai-sdk/provider";
import { stepCountIs, tool } from "ai";
import { MockLanguageModelV3 } from "ai/test";
import { z } from "zod";

import { ContextdAISession } from "../src/ai-sdk.js";
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

const TOOLS = {
  run_tests: tool({
    description: "Runs the tests in `path` and returns pytest's output.",
    inputSchema: z.object({ path: z.string() }),
    execute: async ({ path }) => runTests(path),
  }),
  read_file: tool({
    description: "Returns the file at `path`.",
    inputSchema: z.object({ path: z.string() }),
    execute: async ({ path }) => readFile(path),
  }),
  edit_file: tool({
    description: "Replaces `search` by `replace` in the file at `path`.",
    inputSchema: z.object({ path: z.string(), search: z.string(), replace: z.string() }),
    execute: async ({ path, search, replace }) => editFile(path, search, replace),
  }),
};

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
function leftOut(prompt: unknown): { from_seq: number; to_seq: number } {
  const seqs = [...JSON.stringify(prompt).matchAll(NAMED)].flatMap((found) =>
    found.slice(1).filter((seq) => seq !== undefined).map(Number),
  );
  if (seqs.length === 0) {
    throw new Error("compaction was to have left the first test run out by now");
  }
  return { from_seq: Math.min(...seqs), to_seq: Math.max(...seqs) };
}

/** The failing test and its error, as the recall's result listed them. */
function failureOf(prompt: LanguageModelV3CallOptions["prompt"]): { test: string; error: string } {
  const output = prompt
    .flatMap((message) => (message.role === "tool" ? message.content : []))
    .flatMap((part) =>
      part.type === "tool-result" && part.toolCallId === RECALL && part.output.type === "text"
        ? [part.output.value]
        : [],
    )
    .join("");
  const test = /::(\w+) FAILED$/m.exec(output);
  const error = /\bE {2,}(.+)$/m.exec(output);
  if (test?.[1] === undefined || error?.[1] === undefined) {
    throw new Error(`the recall did not find the failure: ${JSON.stringify(output)}`);
  }
  return { test: test[1], error: error[1] };
}

/** The engineer, scripted: each call answers the next turn, with the usage a provider would
 * report (estimated from the characters it received, about four per token). */
function scriptedEngineer(): MockLanguageModelV3 {
  let index = 0;
  return new MockLanguageModelV3({
    doGenerate: async ({ prompt }) => {
      const turn = TURNS[index];
      index += 1;
      if (turn === undefined) {
        throw new Error("the script has no more turns");
      }
      let text = turn.text;
      if (text.includes("{test}")) {
        const failure = failureOf(prompt);
        console.log(`recalled: ${failure.test} failed with ${failure.error}`);
        text = text.replace("{test}", failure.test).replace("{error}", failure.error);
      }
      const content: LanguageModelV3Content[] = [{ type: "text", text }];
      turn.calls.forEach(([name, args], number) => {
        const given = name === RECALL_TOOL_NAME ? { ...leftOut(prompt), ...args } : args;
        content.push({
          type: "tool-call",
          toolCallId: `call-${index}-${number + 1}`,
          toolName: name,
          input: JSON.stringify(given),
        });
      });
      const inputTokens = Math.floor(JSON.stringify(prompt).length / 4);
      const outputTokens = Math.floor(text.length / 4);
      return {
        content,
        finishReason: { unified: turn.calls.length > 0 ? "tool-calls" : "stop", raw: undefined },
        usage: {
          inputTokens: { total: inputTokens, noCache: inputTokens, cacheRead: 0, cacheWrite: 0 },
          outputTokens: { total: outputTokens, text: outputTokens, reasoning: 0 },
        },
        warnings: [],
      };
    },
  });
}

async function main(): Promise<void> {
  const sessionId = `ai-sdk-loop-${randomUUID().replaceAll("-", "").slice(0, 12)}`;
  const session = new ContextdAISession(sessionId, {
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
  console.log(`session ${sessionId}`);
  let step = 0;
  let compactions = 0;
  const result = await session.generateText({
    model: scriptedEngineer(),
    system: INSTRUCTIONS,
    prompt: TASK,
    tools: TOOLS,
    stopWhen: stepCountIs(TURNS.length),
    onStepFinish: (finished) => {
      const assembly = session.link.lastAssembly;
      step += 1;
      // A compaction that would free too little writes nothing: count those that applied.
      const applied = session.link.compactions.filter((each) => each.applied).length;
      const fired = applied > compactions;
      compactions = applied;
      const calls = finished.toolCalls.map((call) => call.toolName);
      const strategy = session.link.compactions.at(-1)?.strategy;
      console.log(
        `step ${step}: assembly ${assembly?.assembly_id}, ${assembly?.total_tokens} tokens ` +
          `assembled, ${finished.usage.inputTokens} input tokens reported, compaction ` +
          `${fired ? `fired (${strategy})` : "no"} -> ${calls.join(", ") || "answers"}`,
      );
    },
  });
  const detail = await session.client.getSession(sessionId);
  console.log(`answer: ${result.text}`);
  console.log(
    `done: ${detail.item_count} items in the log, ${detail.compactions} compaction(s), ` +
      `${detail.active_tokens} tokens active`,
  );
  await session.close();
}

await main();
