/**
 * What the adapter tests share: a real trajectory (the Python adapter tests' own) cut into the
 * turns a scripted model replays, and the usage counters of the service's `/metrics` text.
 *
 * A `Script` is the model's side of a recorded run: each turn is what the assistant said and the
 * calls it made, in Responses form; the tools answer each call with the output the run recorded.
 */

import { readFileSync } from "node:fs";

import type { Item } from "../src/index.js";
import { ROOT } from "./server.js";

export const TRAJECTORY = `${ROOT}/tests/data/trajectories/swea_fncall_marshmallow-1867.jsonl`;
export const GOAL = "Make marshmallow's TimeDelta serialize 345 milliseconds as 345, not 344.";
/** A window the trajectory outgrows part-way through, so the advice fires during the run. */
export const SMALL_WINDOW = 12_000;

export interface Turn {
  text: string;
  calls: { call_id: string; name: string; arguments: string }[];
}

export interface Script {
  instructions: string;
  prompt: string;
  turns: Turn[];
  outputs: Map<string, string>;
  toolNames: string[];
}

function textOf(item: Item): string {
  const content = item.content;
  if (typeof content === "string") {
    return content;
  }
  return (Array.isArray(content) ? content : [])
    .map((part: { text?: string }) => part.text ?? "")
    .join("");
}

/** The recorded run as a script; `turns` keeps only the first ones (a last turn answering in
 * text then ends the loop). */
export function loadScript(turns?: number): Script {
  const items = readFileSync(TRAJECTORY, "utf8")
    .split("\n")
    .filter((line) => line.trim() !== "")
    .map((line) => JSON.parse(line) as Item);
  const [system, user, ...rest] = items;
  const made: Turn[] = [];
  const outputs = new Map<string, string>();
  let text = "";
  let calls: Turn["calls"] = [];
  for (const item of rest) {
    if (item.type === "message" && item.role === "assistant") {
      if (calls.length > 0) {
        made.push({ text, calls });
        calls = [];
      }
      text = textOf(item);
    } else if (item.type === "function_call") {
      calls.push({
        call_id: String(item.call_id),
        name: String(item.name),
        arguments: String(item.arguments),
      });
    } else if (item.type === "function_call_output") {
      const output = item.output;
      outputs.set(String(item.call_id), typeof output === "string" ? output : JSON.stringify(output));
    }
  }
  if (calls.length > 0) {
    made.push({ text, calls });
  }
  const kept = turns === undefined ? made : made.slice(0, turns);
  kept.push({ text: "Done: the fix is in and the tests pass.", calls: [] });
  const toolNames = [...new Set(kept.flatMap((turn) => turn.calls.map((call) => call.name)))].sort();
  return {
    instructions: textOf(system ?? {}),
    prompt: textOf(user ?? {}),
    turns: kept,
    outputs,
    toolNames,
  };
}

/** `unit`'s usage counters in the service's `/metrics` text: provider tokens by kind, and the
 * cache counters of usage reported against an assembly (the outcomes over their classes). */
export function usageCounters(metrics: string, unit: string): Record<string, number> {
  const counters: Record<string, number> = {};
  for (const line of metrics.split("\n")) {
    const found = /^(contextd_[a-z_]+_total)\{([^}]*)\} (\S+)$/.exec(line);
    if (found === null) {
      continue;
    }
    const [, name, labelText, value] = found;
    const labels = Object.fromEntries(
      [...(labelText ?? "").matchAll(/(\w+)="([^"]*)"/g)].map((match) => [match[1], match[2]]),
    );
    if (labels.unit !== unit) {
      continue;
    }
    if (name === "contextd_provider_tokens_total") {
      counters[String(labels.kind)] = Number(value);
    } else if (name?.startsWith("contextd_cache_")) {
      // Summed over the other labels (the outcome counters' class).
      counters[name] = (counters[name] ?? 0) + Number(value);
    }
  }
  return counters;
}

/** Every function call has exactly one output after it, and every output a call before it. */
export function responsesPairingHolds(items: readonly Item[]): boolean {
  const open = new Set<string>();
  const answered = new Set<string>();
  for (const item of items) {
    const callId = String(item.call_id ?? item.callId);
    if (item.type === "function_call") {
      open.add(callId);
    } else if (item.type === "function_call_output" || item.type === "function_call_result") {
      if (!open.has(callId) || answered.has(callId)) {
        return false;
      }
      answered.add(callId);
    }
  }
  return open.size === answered.size;
}

/** Provider tokens the scripted model counts beyond the assembly (instructions, tool schemas). */
export const OVERHEAD = 300;
