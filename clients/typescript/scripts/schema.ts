/**
 * The types of `src/schema.ts`, rendered from the service's committed `openapi.yaml`. Both the
 * `generate` script and the drift test call `renderSchema`, so the options live only here.
 *
 * `defaultNonNullable: false` keeps a field that has a default optional: a request may leave it
 * out and the service fills it in.
 */
import { readFile, writeFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import openapiTS, { astToString } from "openapi-typescript";

export const OPENAPI = fileURLToPath(new URL("../../../openapi.yaml", import.meta.url));
export const SCHEMA = fileURLToPath(new URL("../src/schema.ts", import.meta.url));

const HEADER =
  "/**\n * Generated from openapi.yaml by `npm run generate` (scripts/schema.ts): do not edit.\n */\n\n";

export async function renderSchema(): Promise<string> {
  const nodes = await openapiTS(await readFile(OPENAPI, "utf8"), { defaultNonNullable: false });
  return HEADER + astToString(nodes);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  await writeFile(SCHEMA, await renderSchema());
}
