/**
 * The recall tool as the framework adapters offer it: its definition, and how a model's call of
 * it becomes a request and its answer the tool's output.
 *
 * A context names what it shows shortened or not at all by fact seq ("the full output is fact
 * seq 7"), and every session-mode assembly offers this tool in its `tools` to read it back
 * (`POST /sessions/{id}/recall`). An adapter offers the same tool in its framework's own form,
 * so the name, description and parameters here are the service's, unchanged (a test holds them
 * against a real assembly's `tools`). They never change within a release: tool definitions come
 * first in a provider's prompt, and a changing one would empty the provider's cache.
 *
 * Invariants:
 * - **Whatever the model sends, the output is text.** It is the service's `tool_output`; or,
 *   when the service refuses the arguments (any 4xx), its error message with the details the
 *   message does not already say; or, when the arguments are no JSON object, a sentence saying
 *   so. A model's mistake is an answer it can correct, never an exception in the framework's
 *   loop. (A service that cannot answer at all, 5xx or unreachable, throws, as every other call
 *   of the adapters does.)
 * - **Nothing is checked here that the service checks.** The arguments go as the model gave
 *   them; the service is the one judge of a recall.
 */

import type { Schemas } from "./client.js";
import { type ContextdError, explained } from "./errors.js";

export const RECALL_TOOL_NAME = "context_recall";
export const RECALL_TOOL_DESCRIPTION =
  "Reads back a fact this context names as 'fact seq N': `seq` gives its text, in windows of" +
  " lines; `pattern` (RE2) with `seq` or `from_seq`/`to_seq` lists the matching lines.";

/** The JSON schema of the tool's arguments. */
export interface RecallParameters {
  type: "object";
  properties: Record<string, { type: "integer" | "string" }>;
  additionalProperties: false;
}

/** A new copy on every call, sharing no part with another (frameworks may change the schema
 * they are given, one property at a time). */
export function recallToolParameters(): RecallParameters {
  return {
    type: "object",
    properties: {
      seq: { type: "integer" },
      from_line: { type: "integer" },
      from_char: { type: "integer" },
      pattern: { type: "string" },
      from_seq: { type: "integer" },
      to_seq: { type: "integer" },
    },
    additionalProperties: false,
  };
}

/** The model's arguments are no JSON object; the message says so, for the model. */
export class InvalidArguments extends Error {}

/** The body of `POST /sessions/{id}/recall` for the model's arguments: a JSON object as text
 * (an empty text is no arguments) or already parsed. Throws `InvalidArguments`. */
export function recallRequest(argumentsGiven: unknown): Schemas["RecallRequest"] {
  let parsed = argumentsGiven;
  if (typeof argumentsGiven === "string") {
    try {
      parsed = argumentsGiven.trim() === "" ? {} : JSON.parse(argumentsGiven);
    } catch (error) {
      throw new InvalidArguments(`the arguments are not valid JSON: ${String(error)}`);
    }
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
    throw new InvalidArguments(
      `the arguments must be a JSON object, not ${JSON.stringify(argumentsGiven)}`,
    );
  }
  return parsed as Schemas["RecallRequest"];
}

/** The service refused the request (4xx): an answer for the model, not a failure. */
export function isRefusal(error: ContextdError): boolean {
  return error.status !== null && error.status >= 400 && error.status < 500;
}

/** A refused recall as the tool's output: the service's message, then each detail it does not
 * already say (a generic "the request failed validation" says nothing of which argument), so
 * that the model can correct its call. */
export function refusalOutput(error: ContextdError): string {
  return explained(error.body.message, error.details);
}
