import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    globalSetup: ["test/setup.ts"],
    // Every test talks to one real server on a 2-core machine: no wall-clock bounds, one file
    // at a time.
    testTimeout: 0,
    hookTimeout: 0,
    fileParallelism: false,
  },
});
