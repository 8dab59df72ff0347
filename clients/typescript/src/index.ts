/**
 * contextd's TypeScript client: `ContextdClient` (one method per operation of openapi.yaml),
 * its errors, and the runtime loop the framework adapters share. The adapters are their own
 * entry points, `contextd-client/ai-sdk` and `contextd-client/agents`, so that importing the
 * client never loads a framework.
 */

export {
  type CallOptions,
  type ClientOptions,
  ContextdClient,
  type Format,
  type Item,
  type Modality,
  type Schemas,
} from "./client.js";
export {
  BadRequest,
  Conflict,
  ContextdError,
  type ErrorBody,
  EvaluationEnded,
  NotFound,
  PayloadTooLarge,
  SequenceConflict,
  ServerError,
  Unauthorized,
  Unavailable,
  Unreachable,
  ValidationFailed,
} from "./errors.js";
export { DEFAULT_RETRIES, DEFAULT_TIMEOUTS, type Retries, type Timeouts } from "./policy.js";
export {
  RECALL_TOOL_DESCRIPTION,
  RECALL_TOOL_NAME,
  recallToolParameters,
} from "./recall.js";
export {
  ContextLink,
  type Entry,
  type LinkOptions,
  Mirror,
  type Strategy,
  type Usage,
} from "./runtime.js";
export type { components, operations, paths } from "./schema.js";
