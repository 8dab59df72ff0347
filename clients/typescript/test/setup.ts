/** vitest's global setup: one contextd server for the whole run, handed to the tests by
 * `inject("contextd")`. */

import type {} from "vitest";
import type { TestProject } from "vitest/node";

import { startServer } from "./server.js";

declare module "vitest" {
  export interface ProvidedContext {
    contextd: { baseUrl: string; apiKey: string };
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const server = await startServer();
  project.provide("contextd", { baseUrl: server.baseUrl, apiKey: server.apiKey });
  return () => server.stop();
}
