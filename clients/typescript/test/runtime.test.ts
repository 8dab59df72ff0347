/**
 * The adapters' shared core against the real server: a framework's list is mirrored once
 * (across a restart and a second mirror of the same thread), what the service does not know is
 * kept and reported, the model gets the assembly (compacted first when advised), usage goes
 * against the assembly, and recall calls are answered with text whatever they ask. Also: the
 * generated types match openapi.yaml, and the recall tool is the one the service offers.
 */

import { readFile } from "node:fs/promises";
import { describe, expect, test } from "vitest";

import { renderSchema, SCHEMA } from "../scripts/schema.js";
import {
  ContextLink,
  type Entry,
  Mirror,
  RECALL_TOOL_DESCRIPTION,
  RECALL_TOOL_NAME,
  recallToolParameters,
} from "../src/index.js";
import { entryDigest, idempotencyKey } from "../src/runtime.js";
import {
  assistantMsg,
  client,
  rawLog,
  sessionId,
  toolCall,
  toolOutput,
  userMsg,
} from "./helpers.js";

function entries(turns: number): Entry[] {
  const made: Entry[] = [];
  for (let n = 0; n < turns; n += 1) {
    made.push(
      { items: [userMsg(`step ${n}: list the files`)], format: "responses" },
      { items: [toolCall(`c${n}`, "shell", '{"cmd": "ls"}')], format: "responses" },
      {
        items: [toolOutput(`c${n}`, `a${n}.py\n` + "line of output\n".repeat(300))],
        format: "responses",
      },
      { items: [assistantMsg(`step ${n} done`)], format: "responses" },
    );
  }
  return made;
}

describe("generated types", () => {
  test("src/schema.ts is what openapi.yaml generates (npm run generate)", async () => {
    expect(await readFile(SCHEMA, "utf8")).toBe(await renderSchema());
  });
});

describe("Mirror", () => {
  test("sends what follows the longest appended prefix", () => {
    const mirror = new Mirror("s");
    const first: Entry[] = [
      { items: [userMsg("a")], format: "responses" },
      { items: [userMsg("b")], format: "responses" },
    ];
    const pending = mirror.pending(first);
    expect(pending.map((each) => each.position)).toEqual([0, 1]);
    for (const each of pending) {
      mirror.mark(each);
    }
    expect(mirror.pending(first)).toEqual([]);
    const rewritten: Entry[] = [
      first[0] as Entry,
      { items: [userMsg("b, shortened")], format: "responses" },
      { items: [userMsg("c")], format: "responses" },
    ];
    expect(mirror.pending(rewritten).map((each) => [each.position, each.entry])).toEqual([
      [1, rewritten[1]],
      [2, rewritten[2]],
    ]);
  });

  test("digests and keys are the Python client's, so both languages key an entry alike", () => {
    const entry: Entry = {
      format: "responses",
      items: [
        {
          type: "message",
          role: "user",
          content: [{ type: "input_text", text: 'héllo "x"\n\u2028' }],
          a: [1, null, true],
        },
      ],
    };
    // As contextd_client.runtime computes them for the same entry.
    const digest = "8330eb68c29479800087f914a9358f09db1df562c60b712b80d869019be27f56";
    expect(entryDigest(entry)).toBe(digest);
    expect(idempotencyKey("s-1", 3, digest)).toBe(
      "mirror-0d378c2bf2581a5a1ab3e0958efbe2eafd964c102c5095aebb9099deaa0a31e4",
    );
  });
});

describe("ContextLink", () => {
  test("a list is mirrored once, across a restart and a second mirror", async () => {
    const ctx = client();
    const id = sessionId("ts-link");
    const list = entries(2);
    const link = new ContextLink(ctx, id, { session: { model: "gpt-4o" } });
    expect(await link.record(list.slice(0, 5))).toBe(5);
    expect(await link.record(list)).toBe(3);
    // A restarted process, and a second one on the same thread, know nothing of what was sent.
    const restarted = new ContextLink(ctx, id);
    expect(await restarted.record(list)).toBe(8);
    expect(await new ContextLink(ctx, id).record(list)).toBe(8);

    expect((await rawLog(ctx, id)).map((each) => each.item)).toEqual(
      list.flatMap((entry) => entry.items),
    );
    expect((await ctx.getSession(id)).model).toBe("gpt-4o");
  });

  test("an unknown item is kept in the log and reported, never shown", async () => {
    const ctx = client();
    const id = sessionId("ts-unknown");
    const link = new ContextLink(ctx, id);
    const unknown = { type: "vendor:thing", payload: { x: 1 } };
    await link.record([
      { items: [userMsg("hi")], format: "responses" },
      { items: [unknown], format: "responses" },
    ]);
    expect(link.excluded.map((each) => [each.seq, each.type])).toEqual([[2, "vendor:thing"]]);
    expect((await rawLog(ctx, id)).map((each) => each.item)).toEqual([userMsg("hi"), unknown]);
    const assembly = await link.context();
    expect(JSON.stringify(assembly.messages)).not.toContain("vendor:thing");
  });

  test("the model gets the assembly, compacted first when advised; usage goes against it", async () => {
    const ctx = client();
    const id = sessionId("ts-compacts");
    const link = new ContextLink(ctx, id, {
      outputFormat: "chat",
      unit: "planner",
      session: { model: "claude-sonnet-4", context_window: 8_000 },
    });
    await link.ensureSession();
    await ctx.putGoal(id, { text: "List every file." });
    await link.record(entries(6));
    const advised = await ctx.compactionAdvice(id);
    expect(advised.should_compact).toBe(true);

    const assembly = await link.context();

    expect(link.compactions.map((each) => each.strategy)).toEqual([advised.recommended_strategy]);
    expect(link.compactions[0]?.compaction_id).toBeTruthy();
    expect(link.lastAssembly).toEqual(assembly);
    expect(assembly.advice.should_compact).toBe(false);
    expect((await ctx.getHistory(id)).compaction_id).toBe(link.compactions[0]?.compaction_id);

    await link.report({ inputTokens: 2_400, cachedTokens: 1_000, outputTokens: 50 });
    const window = await ctx.contextWindow(id);
    expect([window.tokenizer.samples, window.tokenizer.calibrated]).toEqual([1, true]);
  });

  test("a configured strategy that cannot apply falls back to the recommended one", async () => {
    const ctx = client();
    const id = sessionId("ts-fallback");
    const link = new ContextLink(ctx, id, {
      compactStrategy: "clear_tool_results",
      session: { context_window: 12_000 },
    });
    const made: Entry[] = [{ items: [userMsg("find why the export crashes")], format: "responses" }];
    for (let n = 0; n < 3; n += 1) {
      const output = Array.from({ length: 1_130 }, (_, k) => `row${n}x${k}`).join(" ");
      made.push(
        { items: [toolCall(`c${n}`, "shell", `{"cmd": "dump ${n}"}`)], format: "responses" },
        { items: [toolOutput(`c${n}`, output)], format: "responses" },
      );
    }
    await link.record(made);
    const recommended = (await ctx.compactionAdvice(id)).recommended_strategy;
    expect([null, "clear_tool_results"]).not.toContain(recommended);

    const assembly = await link.context();

    expect(
      link.compactions.map((each) => [each.requested_strategy, each.strategy, each.applied]),
    ).toEqual([["clear_tool_results", recommended, true]]);
    expect(assembly.advice.should_compact).toBe(false);
  });

  test("compaction can be left to the caller", async () => {
    const link = new ContextLink(client(), sessionId("ts-no-compact"), {
      compact: false,
      session: { context_window: 8_000 },
    });
    await link.record(entries(6));
    expect((await link.context()).advice.should_compact).toBe(true);
    expect(link.compactions).toEqual([]);
  });

  test("a recall call is answered with text, whatever it asks", async () => {
    const ctx = client();
    const id = sessionId("ts-recall-link");
    const link = new ContextLink(ctx, id);
    await link.record(entries(1));
    expect(await link.recall('{"seq": 3, "pattern": "^a0\\\\.py$"}')).toContain("a0.py");
    expect(await link.recall({ seq: 3, max_lines: 1 })).toContain("a0.py");
    expect(await link.recall("not json")).toMatch(/^the arguments are not valid JSON/);
    expect(await link.recall("[1]")).toBe("the arguments must be a JSON object, not \"[1]\"");
    const refused = await link.recall({ seq: 999 });
    expect(refused.length).toBeGreaterThan(0);
    const invalid = await link.recall({ seq: "seven" });
    expect(invalid).toContain("seq");
  });
});

describe("the recall tool", () => {
  test("is the one every session-mode assembly offers", async () => {
    const ctx = client();
    const id = sessionId("ts-tool");
    await ctx.createSession({ session_id: id });
    const offered = (await ctx.assemble({ session_id: id, output_format: "responses" })).tools;
    expect(offered).toEqual([
      {
        type: "function",
        name: RECALL_TOOL_NAME,
        description: RECALL_TOOL_DESCRIPTION,
        parameters: recallToolParameters(),
        strict: false,
      },
    ]);
  });
});
