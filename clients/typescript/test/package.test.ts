/**
 * The package as a user installs it (issue 46): `npm pack` builds it first (`prepare`), so the
 * tarball holds the compiled modules its `exports` name, and a project that installs it, from
 * the tarball or from this directory, imports it and calls the service.
 */

import { execFile } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterAll, describe, expect, test } from "vitest";

import { server } from "./helpers.js";

const HERE = fileURLToPath(new URL("..", import.meta.url));
const run = promisify(execFile);
const made: string[] = [];

afterAll(async () => {
  await Promise.all(made.map((path) => rm(path, { recursive: true, force: true })));
});

async function scratch(): Promise<string> {
  const path = await mkdtemp(join(tmpdir(), "contextd-client-package-"));
  made.push(path);
  return path;
}

/** A new project that installs `spec` and, from its own directory, imports the package and
 * asks the suite's server whether it is healthy: what the import printed. */
async function installAndCall(spec: string): Promise<string> {
  const project = await scratch();
  await writeFile(
    join(project, "package.json"),
    JSON.stringify({ name: "consumer", version: "1.0.0", type: "module", private: true }),
  );
  await run("npm", ["install", "--no-audit", "--no-fund", "--prefer-offline", spec], {
    cwd: project,
  });
  const { baseUrl, apiKey } = server();
  const script = `
    const { ContextdClient, ContextLink } = await import("contextd-client");
    const client = new ContextdClient({ baseUrl: ${JSON.stringify(baseUrl)}, apiKey: ${JSON.stringify(apiKey)} });
    console.log(JSON.stringify({ health: await client.healthz(), link: typeof ContextLink }));
    await client.close();
  `;
  const { stdout } = await run("node", ["--input-type=module", "-e", script], { cwd: project });
  return stdout.trim();
}

describe("the package", () => {
  test("packs its compiled modules and installs from the tarball or the directory", async () => {
    const destination = await scratch();
    const { stdout } = await run("npm", ["pack", "--json", "--pack-destination", destination], {
      cwd: HERE,
    });
    const [packed] = JSON.parse(stdout) as { filename: string; files: { path: string }[] }[];
    const files = (packed?.files ?? []).map((file) => file.path);
    expect(files).toEqual(
      expect.arrayContaining([
        "dist/src/index.js",
        "dist/src/index.d.ts",
        "dist/src/ai-sdk.js",
        "dist/src/agents.js",
        "package.json",
      ]),
    );

    const expected = JSON.stringify({ health: { status: "ok" }, link: "function" });
    expect(await installAndCall(join(destination, packed?.filename ?? ""))).toBe(expected);
    expect(await installAndCall(HERE)).toBe(expected);
  }, 180_000);
});
