/**
 * Errors as typed exceptions, and when the client tries a call again: the service's own error
 * answers (real server), then 503s with `Retry-After`, lost answers, refused connections and
 * attempts that time out (local HTTP servers standing in front of, or in place of, the real one).
 */

import { once } from "node:events";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { afterEach, describe, expect, test } from "vitest";

import {
  BadRequest,
  ContextdClient,
  ContextdError,
  NotFound,
  PayloadTooLarge,
  SequenceConflict,
  ServerError,
  Unauthorized,
  Unavailable,
  Unreachable,
  ValidationFailed,
} from "../src/index.js";
import { client, rawLog, server, sessionId, userMsg } from "./helpers.js";

interface Seen {
  method: string;
  path: string;
  body: string;
}

type Handler = (
  request: IncomingMessage,
  response: ServerResponse,
  seen: Seen,
  index: number,
) => void | Promise<void>;

const servers: Server[] = [];

afterEach(async () => {
  for (const each of servers.splice(0)) {
    each.closeAllConnections();
    each.close();
  }
});

/** A loopback HTTP server answering with `handler`, recording every request it read. */
async function local(handler: Handler): Promise<{ url: string; seen: Seen[] }> {
  const seen: Seen[] = [];
  const http = createServer(async (request, response) => {
    const chunks: Buffer[] = [];
    for await (const chunk of request) {
      chunks.push(chunk as Buffer);
    }
    const entry = {
      method: request.method ?? "",
      path: request.url ?? "",
      body: Buffer.concat(chunks).toString("utf8"),
    };
    seen.push(entry);
    await handler(request, response, entry, seen.length - 1);
  });
  servers.push(http);
  http.listen(0, "127.0.0.1");
  await once(http, "listening");
  const address = http.address();
  if (address === null || typeof address === "string") {
    throw new Error("no address");
  }
  return { url: `http://127.0.0.1:${address.port}`, seen };
}

/** Sends the request on to the real server and hands its answer to `answer`. */
async function forward(entry: Seen, request: IncomingMessage): Promise<Response> {
  return fetch(`${server().baseUrl}${entry.path}`, {
    method: entry.method,
    headers: {
      authorization: String(request.headers.authorization ?? ""),
      "content-type": "application/json",
    },
    ...(entry.method === "GET" ? {} : { body: entry.body }),
  });
}

async function relay(response: ServerResponse, upstream: Response): Promise<void> {
  response.writeHead(upstream.status, { "content-type": "application/json" });
  response.end(await upstream.text());
}

function unavailable(response: ServerResponse, retryAfter: string): void {
  response.writeHead(503, { "content-type": "application/json", "retry-after": retryAfter });
  response.end(
    JSON.stringify({
      error: { code: "database_unavailable", message: "the database is unreachable" },
    }),
  );
}

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error("the call was to fail");
}

function keyOf(entry: Seen | undefined): unknown {
  return (JSON.parse(entry?.body ?? "{}") as { idempotency_key?: unknown }).idempotency_key;
}

describe("errors", () => {
  test("each status is its class, with the service's body", async () => {
    const ctx = client();
    const id = sessionId("ts-errors");

    const missing = await rejection(ctx.getSession(id));
    expect(missing).toBeInstanceOf(NotFound);
    expect((missing as NotFound).status).toBe(404);
    expect((missing as NotFound).body.code).toBe("not_found");

    const stranger = new ContextdClient({ baseUrl: server().baseUrl, apiKey: "not-a-key" });
    const refused = await rejection(stranger.getSession(id));
    expect(refused).toBeInstanceOf(Unauthorized);
    expect((refused as Unauthorized).status).toBe(401);

    await ctx.createSession({ session_id: id });
    await ctx.appendItems(id, { items: [userMsg("one")] });
    const conflict = await rejection(
      ctx.appendItems(id, { items: [userMsg("two")], expected_last_seq: 0 }),
    );
    expect(conflict).toBeInstanceOf(SequenceConflict);
    expect([(conflict as SequenceConflict).expected, (conflict as SequenceConflict).actual]).toEqual(
      [0, 1],
    );

    const invalid = await rejection(ctx.compact({ session_id: id, strategy: "no-such" as never }));
    expect(invalid).toBeInstanceOf(ValidationFailed);
    const { body, status } = invalid as ValidationFailed;
    expect([status, body.code]).toEqual([422, "validation_error"]);
    expect(Array.isArray(body.details)).toBe(true);
    // Issue 46: the error says which field and what it may be, not only `.details`.
    expect((invalid as ValidationFailed).message).toMatch(
      /^422 validation_error: the request failed validation; strategy: Input should be 'clear_tool_results', 'truncate', /,
    );

    const huge = "x".repeat(5 * 1024 * 1024);
    const tooLarge = await rejection(ctx.appendItems(id, { items: [userMsg(huge)] }));
    expect(tooLarge).toBeInstanceOf(PayloadTooLarge);
  });

  test("an answer not in the service's shape keeps its status and text", async () => {
    const proxy = await local((_request, response) => {
      response.writeHead(502, { "content-type": "text/plain" });
      response.end("bad gateway from the proxy");
    });
    const error = await rejection(new ContextdClient({ baseUrl: proxy.url }).healthz());
    expect(error).toBeInstanceOf(ServerError);
    expect((error as ServerError).body).toEqual({
      code: "http_502",
      message: "bad gateway from the proxy",
      details: null,
    });

    const malformed = await local((_request, response) => {
      response.writeHead(400, { "content-type": "application/json" });
      response.end(JSON.stringify({ error: { code: "malformed_json", message: "not JSON" } }));
    });
    const bad = await rejection(new ContextdClient({ baseUrl: malformed.url }).healthz());
    expect(bad).toBeInstanceOf(BadRequest);
    expect(bad).toBeInstanceOf(ContextdError);
  });
});

describe("retries", () => {
  test("a 503 is retried after its Retry-After, the append with the same key", async () => {
    const id = sessionId("ts-retry");
    await client().createSession({ session_id: id });
    const proxy = await local(async (request, response, entry, index) => {
      if (index === 0) {
        unavailable(response, "1");
      } else {
        await relay(response, await forward(entry, request));
      }
    });
    const ctx = new ContextdClient({ baseUrl: proxy.url, apiKey: server().apiKey });

    const appended = await ctx.appendItems(id, { items: [userMsg("once")] });

    expect(appended.first_seq).toBe(1);
    expect(proxy.seen).toHaveLength(2);
    expect(keyOf(proxy.seen[0])).toMatch(/^ctxc-/);
    expect(keyOf(proxy.seen[1])).toBe(keyOf(proxy.seen[0]));
    expect(await rawLog(client(), id)).toEqual([{ type: "message", item: userMsg("once") }]);
  });

  test("a Retry-After past the call's total time is not waited for", async () => {
    const proxy = await local((_request, response) => unavailable(response, "3600"));
    const ctx = new ContextdClient({ baseUrl: proxy.url, timeouts: { totalMs: 10_000 } });

    const error = await rejection(ctx.getSession("any"));

    expect(error).toBeInstanceOf(Unavailable);
    expect((error as Unavailable).retryAfterMs).toBe(3_600_000);
    expect(proxy.seen).toHaveLength(1);
  });

  test("an append whose answer was lost is sent again with its key and written once", async () => {
    const id = sessionId("ts-lost");
    await client().createSession({ session_id: id });
    const proxy = await local(async (request, response, entry, index) => {
      const upstream = await forward(entry, request);
      if (index === 0) {
        await upstream.text();
        response.socket?.destroy();
      } else {
        await relay(response, upstream);
      }
    });
    const ctx = new ContextdClient({
      baseUrl: proxy.url,
      apiKey: server().apiKey,
      retries: { backoffMs: 1 },
    });

    const appended = await ctx.appendItems(id, { items: [userMsg("a"), userMsg("b")] });

    expect([appended.first_seq, appended.last_seq]).toEqual([1, 2]);
    expect(proxy.seen.map(keyOf)).toEqual([keyOf(proxy.seen[0]), keyOf(proxy.seen[0])]);
    expect((await rawLog(client(), id)).map((each) => each.item)).toEqual([
      userMsg("a"),
      userMsg("b"),
    ]);
  });

  test("a write without a key whose answer was lost is not sent again", async () => {
    const id = sessionId("ts-lost-goal");
    await client().createSession({ session_id: id });
    const proxy = await local(async (request, response, entry) => {
      await (await forward(entry, request)).text();
      response.socket?.destroy();
    });
    const ctx = new ContextdClient({
      baseUrl: proxy.url,
      apiKey: server().apiKey,
      retries: { backoffMs: 1 },
    });

    const error = await rejection(ctx.putGoal(id, { text: "once" }));

    expect(error).toBeInstanceOf(Unreachable);
    expect((error as Unreachable).status).toBeNull();
    expect(proxy.seen).toHaveLength(1);
    expect((await client().getSession(id)).goal).toEqual({ version: 1, text: "once" });
  });

  test("a connection refused is retried for any call, up to the attempts", async () => {
    const closed = await local(() => undefined);
    const url = closed.url;
    servers.pop()?.close();
    let attempts = 0;
    const ctx = new ContextdClient({
      baseUrl: url,
      retries: { attempts: 3, backoffMs: 1 },
      fetch: (request) => {
        attempts += 1;
        return fetch(request);
      },
    });

    const error = await rejection(ctx.putGoal("any", { text: "goal" }));

    expect(error).toBeInstanceOf(Unreachable);
    expect(attempts).toBe(3);
    // Issue 46: which service could not be reached, and why ("fetch failed" said neither).
    const { port } = new URL(url);
    expect((error as Unreachable).message).toContain(`at ${url}: TypeError: fetch failed (`);
    expect((error as Unreachable).message).toContain(`ECONNREFUSED 127.0.0.1:${port}`);
  });

  test("an attempt that times out is retried for a read, not for a write", async () => {
    const stalled = await local(() => undefined);
    const options = {
      baseUrl: stalled.url,
      timeouts: { attemptMs: 100 },
      retries: { attempts: 3, backoffMs: 1 },
    };

    expect(await rejection(new ContextdClient(options).getSession("any"))).toBeInstanceOf(
      Unreachable,
    );
    expect(stalled.seen).toHaveLength(3);

    expect(
      await rejection(new ContextdClient(options).putGoal("any", { text: "goal" })),
    ).toBeInstanceOf(Unreachable);
    expect(stalled.seen).toHaveLength(4);
  });

  test("the caller's signal ends the call and its retries at once", async () => {
    const proxy = await local((_request, response) => unavailable(response, "3"));
    const ctx = new ContextdClient({ baseUrl: proxy.url });
    const controller = new AbortController();

    const call = ctx.getSession("any", { signal: controller.signal });
    while (proxy.seen.length === 0) {
      await new Promise((resolve) => setImmediate(resolve));
    }
    controller.abort(new Error("the user went away"));

    expect(await rejection(call)).toEqual(new Error("the user went away"));
    expect(proxy.seen).toHaveLength(1);
  });

  test("probes are never retried", async () => {
    const proxy = await local((_request, response) => unavailable(response, "0"));
    const ctx = new ContextdClient({ baseUrl: proxy.url });
    expect(await rejection(ctx.readyz())).toBeInstanceOf(Unavailable);
    expect(proxy.seen).toHaveLength(1);
  });
});
