/**
 * A real contextd server for the test suite: a throwaway PostgreSQL database (created, migrated,
 * dropped afterwards, as the Python suite does) and `contextd serve` on a free loopback port,
 * with an API key. Nothing here mocks the service.
 *
 * The PostgreSQL server is the one `CTX_TEST_POSTGRES_URL` names (the Makefile exports it), and
 * the service runs from the repository's virtualenv (`make install`).
 */

import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { createServer } from "node:net";
import { fileURLToPath } from "node:url";
import { setTimeout as sleep } from "node:timers/promises";

export const ROOT = fileURLToPath(new URL("../../..", import.meta.url));
const BIN = `${ROOT}/.venv/bin`;
const ADMIN_URL =
  process.env.CTX_TEST_POSTGRES_URL ?? "postgresql+psycopg://postgres@127.0.0.1:5432/postgres";

export interface RunningServer {
  baseUrl: string;
  apiKey: string;
  stop(): Promise<void>;
}

/** `url` with another database, in SQLAlchemy form (for the service) or libpq form. */
function withDatabase(url: string, name: string, { libpq }: { libpq: boolean }): string {
  const parsed = new URL(libpq ? url.replace(/^postgresql\+\w+:/, "postgresql:") : url);
  parsed.pathname = `/${name}`;
  return parsed.toString();
}

function admin(statement: string): void {
  const conninfo = withDatabase(ADMIN_URL, "postgres", { libpq: true });
  execFileSync(
    `${BIN}/python`,
    [
      "-c",
      "import sys, psycopg\n" +
        "with psycopg.connect(sys.argv[1], autocommit=True) as admin:\n" +
        "    admin.execute(sys.argv[2])",
      conninfo,
      statement,
    ],
    { stdio: "inherit" },
  );
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once("error", reject);
    probe.listen(0, "127.0.0.1", () => {
      const address = probe.address();
      probe.close(() => {
        if (address === null || typeof address === "string") {
          reject(new Error("no port"));
        } else {
          resolve(address.port);
        }
      });
    });
  });
}

async function waitUntilReady(baseUrl: string, process: ChildProcess): Promise<void> {
  for (;;) {
    if (process.exitCode !== null) {
      throw new Error(`contextd exited with ${process.exitCode}`);
    }
    try {
      if ((await fetch(`${baseUrl}/readyz`)).ok) {
        return;
      }
    } catch {
      // Not listening yet.
    }
    await sleep(50);
  }
}

export async function startServer(): Promise<RunningServer> {
  const database = `contextd_test_ts_${randomUUID().replaceAll("-", "")}`;
  admin(`CREATE DATABASE "${database}"`);
  const apiKey = `ctx-ts-tests-${randomUUID()}`;
  const env = {
    ...process.env,
    CTX_DATABASE_URL: withDatabase(ADMIN_URL, database, { libpq: false }),
    CTX_API_KEYS: JSON.stringify([`ts-tests:${apiKey}`]),
    // An evaluation of more than 25 calls runs as a job: the client follows it to its result.
    CTX_EVALUATE_SYNC_CALLS: "25",
    CTX_EVALUATE_PROGRESS_SECONDS: "0.01",
  };
  execFileSync(`${BIN}/contextd`, ["migrate"], { env, cwd: ROOT, stdio: "ignore" });
  const port = await freePort();
  const child = spawn(`${BIN}/contextd`, ["serve", "--host", "127.0.0.1", "--port", String(port)], {
    env,
    cwd: ROOT,
    stdio: "ignore",
  });
  const baseUrl = `http://127.0.0.1:${port}`;
  await waitUntilReady(baseUrl, child);
  return {
    baseUrl,
    apiKey,
    async stop() {
      const exited = new Promise((resolve) => child.once("exit", resolve));
      child.kill("SIGTERM");
      await exited;
      admin(`DROP DATABASE IF EXISTS "${database}" WITH (FORCE)`);
    },
  };
}
