// GraphQL Code Generator: the client preset over src/codegen, with persisted
// documents. `npm run codegen` writes src/codegen/gql/ (git-ignored) and copies
// its persisted-documents.json to manifests/codegen-persisted-documents.json.
import type { CodegenConfig } from "@graphql-codegen/cli";

const config: CodegenConfig = {
  schema: "../../schema.graphql",
  documents: ["src/codegen/**/*.ts", "!src/codegen/gql/**"],
  ignoreNoDocuments: false,
  generates: {
    "./src/codegen/gql/": {
      preset: "client",
      presetConfig: {
        // Ids are "sha256:" + the sha256 hex of the stored text (the preset's default).
        persistedDocuments: true,
      },
    },
  },
};

export default config;
