/** The examples run as written, against the suite's server, with no provider and no key:
 * compaction fires mid-run and the model answers with what it recalled. */

import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { describe, expect, test } from "vitest";

import { server } from "./helpers.js";

const HERE = fileURLToPath(new URL("..", import.meta.url));

describe("examples", () => {
  test.each(["examples/agents_loop.ts", "examples/ai_sdk_loop.ts"])("%s", async (example) => {
    const { baseUrl, apiKey } = server();
    const { stdout } = await promisify(execFile)(`${HERE}node_modules/.bin/tsx`, [example], {
      cwd: HERE,
      env: { ...process.env, CONTEXTD_URL: baseUrl, CONTEXTD_API_KEY: apiKey, OPENAI_API_KEY: "" },
    });
    const lines = stdout.split("\n");
    expect(lines[0]).toMatch(/^session \S+$/);
    expect(lines.some((line) => line.includes("compaction fired (clear_tool_results)"))).toBe(true);
    // Once clearing frees too little, the link falls back to the recommended strategy rather
    // than post a no-op on every step.
    expect(lines.some((line) => line.includes("compaction fired (summary)"))).toBe(true);
    expect(lines).toContain(
      "recalled: test_parse_port_strips_whitespace failed with ValueError: not a port: ' 8080\\n'",
    );
    expect(lines.some((line) => /^done: \d+ items in the log, 2 compaction\(s\)/.test(line))).toBe(
      true,
    );
  });
});
