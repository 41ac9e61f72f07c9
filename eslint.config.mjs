// Lint config for the extension and its tests: typescript-eslint's recommended
// rules, every rule an error (warnings are never left to pile up).
import js from "@eslint/js";
import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: ["dist/**", "node_modules/**", ".cache/**", "python_backend/**", "tests/extension/out/**"] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ["**/*.ts"],
    rules: {
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_" }],
      "@typescript-eslint/no-explicit-any": "error",
      eqeqeq: ["error", "always", { null: "ignore" }],
      curly: "error",
      "no-console": "error",
    },
  },
  {
    files: ["tests/extension/runner/**/*.ts", "tests/extension/unit/run.ts"],
    rules: { "no-console": "off" },
  },
  {
    linterOptions: { reportUnusedDisableDirectives: "error" },
  },
);
