/**
 * Every operation of openapi.yaml through `ContextdClient`, once, against the suite's real
 * server: each answer is held whole against what the contract says or, where it is too large to
 * spell out, against the same request sent with plain fetch.
 */

import { describe, expect, test } from "vitest";

import { ContextdClient, type operations } from "../src/index.js";
import {
  assistantMsg,
  client,
  rawLog,
  server,
  sessionId,
  toolCall,
  toolOutput,
  userMsg,
} from "./helpers.js";

/** `append_items` as `appendItems`. */
type CamelCase<S extends string> = S extends `${infer Head}_${infer Tail}`
  ? `${Head}${Capitalize<CamelCase<Tail>>}`
  : S;

/** Fails to type-check when an operation of openapi.yaml has no method. */
type MissingMethods = Exclude<CamelCase<keyof operations & string>, keyof ContextdClient>;
const everyOperationHasAMethod: [MissingMethods] extends [never] ? true : MissingMethods = true;

async function plain(method: string, path: string, body?: unknown): Promise<unknown> {
  const { baseUrl, apiKey } = server();
  const response = await fetch(`${baseUrl}${path}`, {
    method,
    headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  expect(response.ok).toBe(true);
  return response.json();
}

function turn(n: number) {
  return [
    userMsg(`step ${n}: list the files`),
    toolCall(`c${n}`, "shell", '{"cmd": "ls"}'),
    toolOutput(`c${n}`, `a${n}.py\n` + "line of output\n".repeat(200)),
    assistantMsg(`step ${n} done`),
  ];
}

describe("ContextdClient", () => {
  test("has a method for every operation", () => {
    expect(everyOperationHasAMethod).toBe(true);
  });

  test("probes and metrics answer", async () => {
    const ctx = client();
    expect(await ctx.healthz()).toEqual({ status: "ok" });
    expect(await ctx.readyz()).toEqual({ status: "ready" });
    expect(await ctx.metrics()).toContain("contextd_");
  });

  test("sessions and the raw log", async () => {
    const ctx = client();
    const id = sessionId("ts-sessions");
    const created = await ctx.createSession({
      session_id: id,
      model: "gpt-4o",
      context_window: 50_000,
      metadata: { team: "a" },
    });
    expect(created).toEqual({
      session_id: id,
      encoding: "o200k_base",
      context_window: 50_000,
      usable_window: 34_000,
      model: "gpt-4o",
      metadata: { team: "a" },
      hooks: { pre_compact: null, session_end: null, failure_policy: "fail_open" },
      compaction: { high_watermark: 0.9, low_watermark: 0.25 },
      cache: { read_price: 0.1, write_price: 1.0, ttl_seconds: 300, minimum_prefix: 1024, block: 128 },
      recall_tool: true,
      tokenizer: {
        family: "openai",
        ratio: 1.0,
        overhead_tokens: 0,
        calibrated: false,
        samples: 0,
        exact: true,
      },
      created_at: created.created_at,
      last_seq: 0,
    });
    const batch = [userMsg("list the files"), toolCall("c1"), toolOutput("c1", "a.py")];
    const appended = await ctx.appendItems(id, { items: batch, unit: "planner", phase: "explore" });
    const logged: Awaited<ReturnType<ContextdClient["listItems"]>>["items"] = [];
    for await (const each of ctx.iterItems(id, { pageSize: 2 })) {
      logged.push(each);
    }
    expect(logged).toEqual(
      batch.map((item, index) => ({
        seq: index + 1,
        item,
        type: item.type,
        recorded_at: logged[index]?.recorded_at,
        unit: "planner",
        phase: "explore",
        tokens: logged[index]?.tokens,
        metadata: { harness_authored: false },
        original: null,
        timeline: appended.timeline,
      })),
    );
    // On PostgreSQL, the timeline that wrote the batch: the same on every item of it.
    expect(appended.timeline).toBeGreaterThanOrEqual(1);
    expect(appended).toEqual({
      first_seq: 1,
      last_seq: 3,
      items: logged.map(({ seq, type, tokens }) => ({ seq, type, tokens })),
      excluded: [],
      timeline: appended.timeline,
    });
    expect(await ctx.listItems(id, { afterSeq: 1, limit: 1 })).toEqual({
      items: logged.slice(1, 2),
      next_after_seq: 2,
    });
    const session = await ctx.getSession(id);
    expect(session).toEqual(await plain("GET", `/sessions/${id}`));
    expect([session.last_seq, session.item_count, session.goal, session.compactions]).toEqual([
      3,
      3,
      null,
      0,
    ]);
  });

  test("goal, world state, history and normalize", async () => {
    const ctx = client();
    const id = sessionId("ts-goal");
    await ctx.createSession({ session_id: id });
    await ctx.appendItems(id, { items: turn(1) });
    expect(await ctx.putGoal(id, { text: "ship the client" })).toEqual({ version: 1, seq: 5 });
    const state = await ctx.putWorldState(id, {
      sections: { rules: ["be brief"], environment: { cwd: "/repo" } },
    });
    expect(state).toEqual({
      version: 1,
      updates: state.updates,
      changes: [
        { section: "environment", change: "added" },
        { section: "rules", change: "added" },
      ],
      patch: null,
    });
    expect(state.updates).toHaveLength(2);
    expect((await ctx.getSession(id)).goal).toEqual({ version: 1, text: "ship the client" });

    const history = await ctx.getHistory(id, { outputFormat: "chat", inputModalities: ["text"] });
    expect(history).toEqual(
      await plain("GET", `/sessions/${id}/history?output_format=chat&input_modalities=text`),
    );
    expect(history.items.slice(0, 2).map((message) => message.role)).toEqual(["user", "assistant"]);

    const unanswered = { items: [userMsg("run it"), toolCall("c9")], truncation: { limit: 100 } };
    const normalized = await ctx.normalize(unanswered);
    expect(normalized).toEqual(await plain("POST", "/history/normalize", unanswered));
    expect(normalized.report.synthesized_outputs.map((entry) => entry.call_id)).toEqual(["c9"]);
  });

  test("recall pages a fact back and searches the log", async () => {
    const ctx = client();
    const id = sessionId("ts-recall");
    await ctx.createSession({ session_id: id });
    const turns = [...turn(1), ...turn(2)];
    await ctx.appendItems(id, { items: turns });
    const first = await ctx.recall(id, { seq: 3, max_lines: 150 });
    expect(first).toEqual(
      await plain("POST", `/sessions/${id}/recall`, { seq: 3, max_lines: 150 }),
    );
    const second = await ctx.recall(id, { seq: 3, from_line: first.next_from_line ?? 0 });
    expect([first.from_line, first.to_line, second.to_line, second.next_from_line]).toEqual([
      1,
      150,
      201,
      null,
    ]);
    expect(`${first.text}${second.text}`).toBe(turns[2]?.output);
    const found = await ctx.recall(id, { from_seq: 1, to_seq: 8, pattern: "^a\\d\\.py$" });
    expect(found.matches).toEqual([
      { seq: 3, line: 1, text: "a1.py" },
      { seq: 7, line: 1, text: "a2.py" },
    ]);
  });

  test("retraction and reset change the active history", async () => {
    const ctx = client();
    const id = sessionId("ts-retract");
    await ctx.createSession({ session_id: id });
    const items = turn(1);
    await ctx.appendItems(id, { items: [...items, userMsg("thanks")] });
    expect(await ctx.retract(id, { seq: 3 })).toEqual({
      seq: 6,
      retracted: [2, 3],
      items: [
        { seq: 2, item: items[1] },
        { seq: 3, item: items[2] },
      ],
    });
    expect((await ctx.getHistory(id)).items).toEqual([items[0], items[3], userMsg("thanks")]);
    expect(await ctx.retract(id)).toEqual({
      seq: 7,
      retracted: [5],
      items: [{ seq: 5, item: userMsg("thanks") }],
    });
    expect(await ctx.reset(id)).toEqual({ seq: 8 });
    expect((await ctx.getHistory(id)).items).toEqual([]);
    expect((await rawLog(ctx, id)).length).toBe(8);
  });

  test("assemble, stored assembly, replay, usage, window and advice", async () => {
    const ctx = client();
    const id = sessionId("ts-assemble");
    await ctx.createSession({ session_id: id, model: "claude-sonnet-4" });
    await ctx.appendItems(id, { items: turn(1), unit: "planner" });
    const notes = [
      { source: "notes", items: [{ id: "n1", content: "def f(): pass", relevance: 0.9 }] },
    ];
    const assembly = await ctx.assemble({ session_id: id, unit: "planner", sources: notes });
    expect(assembly.items.filter((item) => item.source === "notes").map((item) => item.id)).toEqual(
      ["n1"],
    );
    const stored = await ctx.getAssembly(assembly.assembly_id);
    expect(stored).toEqual({
      assembly_id: assembly.assembly_id,
      created_at: stored.created_at,
      session_id: id,
      request: stored.request,
      response: assembly,
      grounding: stored.grounding,
      cache_outcome: null, // no usage reported against it yet
    });
    const replayed = await ctx.replayAssembly(assembly.assembly_id, {
      overrides: { drop_sources: ["notes"] },
    });
    expect(replayed.diff.removed).toEqual(["n1"]);
    expect(replayed.assembly.assembly_id).not.toBe(assembly.assembly_id);

    await ctx.reportUsage(id, {
      input_tokens: assembly.total_tokens + 10,
      cached_tokens: 0,
      output_tokens: 7,
      assembly_id: assembly.assembly_id,
    });
    const window = await ctx.contextWindow(id);
    expect(window).toEqual(await plain("GET", `/sessions/${id}/context-window`));
    expect([window.tokenizer.family, window.tokenizer.calibrated, window.tokenizer.samples]).toEqual(
      ["anthropic", true, 1],
    );
    expect(await ctx.compactionAdvice(id)).toEqual(
      await plain("GET", `/sessions/${id}/compaction-advice`),
    );
    // Priced by a lineage's cache: the planner's call came moments ago (its context is under
    // the minimum cacheable prefix, so nothing is cached); the session's own lineage has had
    // no call.
    const priced = (await ctx.compactionAdvice(id, { unit: "planner" })).cache;
    expect([priced?.state, priced?.ttl_seconds]).toEqual(["empty", 300]);
    expect(priced?.idle_seconds).toBeGreaterThanOrEqual(0);
    expect(priced?.idle_seconds).toBeLessThan(300);
    expect((await ctx.compactionAdvice(id)).cache).toEqual({
      state: "empty",
      idle_seconds: null,
      ttl_seconds: 300,
      horizon_calls: priced?.horizon_calls,
      reduction_tokens: 0,
      saving: 0,
      cost: 0,
      at_least_tokens: 0,
    });
  });

  test("evaluate: at once, or as a job the client follows to its result", async () => {
    const ctx = client();
    const id = sessionId("ts-evaluate");
    await ctx.createSession({ session_id: id });
    await ctx.appendItems(id, { items: [1, 2, 3, 4, 5].flatMap((n) => turn(n)) });
    const never = { name: "never", follow_advice: false };
    const small = { name: "small", keep_recent: 1 };
    // 2 x 10 calls: answered at once.
    const atOnce = await ctx.evaluate(id, { variants: [never] });
    expect(atOnce).toEqual(await plain("POST", `/sessions/${id}/evaluate`, { variants: [never] }));
    // 3 x 10 calls, over the server's 25: a job, which the client follows to its result.
    const followed = await ctx.evaluate(id, { variants: [never, small] }, { pollMs: 10 });
    expect(followed.variants.map((variant) => variant.name)).toEqual(["current", "never", "small"]);
    expect(followed.variants.slice(0, 2)).toEqual(atOnce.variants);
    const started = (await plain("POST", `/sessions/${id}/evaluate`, {
      variants: [never, small],
    })) as { evaluation_id: string };
    const job = await ctx.getEvaluation(started.evaluation_id);
    expect(job).toEqual(await plain("GET", `/evaluations/${started.evaluation_id}`));
    expect([job.status, job.result]).toEqual(["done", followed]);
    expect(await ctx.cancelEvaluation(job.evaluation_id)).toEqual(job); // done: nothing to cancel
  });

  test("compact: a dry run, then applied", async () => {
    const ctx = client();
    const id = sessionId("ts-compact");
    await ctx.createSession({ session_id: id });
    for (let n = 1; n <= 5; n += 1) {
      await ctx.appendItems(id, { items: turn(n) });
    }
    const body = {
      session_id: id,
      strategy: "clear_tool_results" as const,
      params: { keep_recent: 1 },
    };
    const proposal = await ctx.compact({ ...body, dry_run: true });
    expect([proposal.applied, proposal.not_applied_because, proposal.compaction_id]).toEqual([
      false,
      "dry_run",
      null,
    ]);
    const compaction = await ctx.compact(body);
    expect([compaction.applied, compaction.dry_run]).toEqual([true, false]);
    expect((await ctx.getHistory(id)).compaction_id).toBe(compaction.compaction_id);
  });

  test("sub-agents: delegate, end, fork, merge", async () => {
    const ctx = client();
    const id = sessionId("ts-children");
    await ctx.createSession({ session_id: id });
    await ctx.appendItems(id, { items: turn(1), unit: "planner" });
    const child = await ctx.delegate(id, {
      goal: "find the bug",
      items: [userMsg("look at a.py")],
      unit: "w",
    });
    expect(child).toEqual({
      session_id: child.session_id,
      parent_id: id,
      kind: "delegate",
      inherit: {},
      unit: "w",
      fork_seq: null,
      last_seq: child.last_seq,
    });
    const ended = await ctx.endSession(child.session_id, {
      conclusion: assistantMsg("found it in a.py"),
    });
    expect(ended.conclusion_seq).toBe((await ctx.getSession(id)).last_seq);

    const fork = await ctx.fork(id, { unit: "explorer" });
    expect([fork.kind, fork.parent_id, fork.unit]).toEqual(["fork", id, "explorer"]);
    const forkedAt = (await ctx.getSession(id)).last_seq;
    const merged = await ctx.merge(fork.session_id, { conclusion: assistantMsg("agreed") });
    expect(merged).toEqual({ parent_id: id, seq: forkedAt + 1 });
    const log = await rawLog(ctx, id);
    expect(log.at(-1)?.item).toEqual(assistantMsg("agreed"));
  });

  test("manifests, with a name the path must escape", async () => {
    const ctx = client();
    const name = `team rules #1 ü ${sessionId("m")}`;
    expect(
      await ctx.putManifest(name, {
        entries: [{ id: "r1", kind: "rule", content: "Answer in one line." }],
        roles: { dev: { include: ["r1"] } },
      }),
    ).toEqual({ name, version: 1 });
    const manifest = await ctx.getManifest(name);
    expect([manifest.name, manifest.version, manifest.entries.map((entry) => entry.id)]).toEqual([
      name,
      1,
      ["r1"],
    ]);
    const id = sessionId("ts-manifest");
    await ctx.createSession({ session_id: id });
    const loaded = await ctx.assemble({ session_id: id, manifest: name, role: "dev" });
    expect(loaded.items.map((item) => [item.id, item.content])).toEqual([
      ["manifest:0000:r1", "Answer in one line."],
    ]);
  });

  test("base URL with a trailing slash and the API key as a bearer token", async () => {
    const { baseUrl } = server();
    const ctx = new ContextdClient({ baseUrl: `${baseUrl}/`, apiKey: server().apiKey });
    expect(await ctx.healthz()).toEqual({ status: "ok" });
  });
});
