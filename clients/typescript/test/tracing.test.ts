/**
 * The caller's trace context goes with every call: inside an active span (OpenTelemetry's API
 * with the W3C propagator and a context manager registered, as an SDK registers them) a call
 * sends `traceparent` naming that span; outside one it sends none.
 */

import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { W3CTraceContextPropagator } from "@opentelemetry/core";
import { context, propagation, trace, TraceFlags } from "@opentelemetry/api";
import { afterAll, beforeAll, describe, expect, test } from "vitest";

import { ContextdClient } from "../src/index.js";

const TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736";
const SPAN_ID = "00f067aa0ba902b7";

/** A client whose requests are kept, each answered as `/healthz` answers. */
function recording(): { client: ContextdClient; sent: Request[] } {
  const sent: Request[] = [];
  const client = new ContextdClient({
    baseUrl: "http://contextd.invalid",
    fetch: async (request) => {
      sent.push(request);
      return Response.json({ status: "ok" });
    },
  });
  return { client, sent };
}

describe("trace context", () => {
  beforeAll(() => {
    context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
    propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  });
  afterAll(() => {
    propagation.disable();
    context.disable();
  });

  test("a call inside an active span sends its traceparent", async () => {
    const { client, sent } = recording();
    const span = trace.wrapSpanContext({
      traceId: TRACE_ID,
      spanId: SPAN_ID,
      traceFlags: TraceFlags.SAMPLED,
    });
    await context.with(trace.setSpan(context.active(), span), () => client.healthz());
    expect(sent.map((request) => request.headers.get("traceparent"))).toEqual([
      `00-${TRACE_ID}-${SPAN_ID}-01`,
    ]);
  });

  test("a call outside any span sends none", async () => {
    const { client, sent } = recording();
    await client.healthz();
    expect(sent.map((request) => request.headers.get("traceparent"))).toEqual([null]);
  });
});
