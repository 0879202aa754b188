// Composes a supergraph with @theguild/federation-composition (the API of @apollo/composition):
//   node compose.mjs NAME URL SDL_FILE [NAME URL SDL_FILE ...] > supergraph.graphql
// A composition error prints the composer's messages on stderr and exits 1.
import { readFileSync } from "node:fs";
import { parse } from "graphql";
import { composeServices, compositionHasErrors } from "@theguild/federation-composition";

const args = process.argv.slice(2);
if (args.length === 0 || args.length % 3 !== 0) {
  console.error("usage: node compose.mjs NAME URL SDL_FILE [NAME URL SDL_FILE ...]");
  process.exit(2);
}
const services = [];
for (let i = 0; i < args.length; i += 3) {
  const [name, url, file] = args.slice(i, i + 3);
  services.push({ name, url, typeDefs: parse(readFileSync(file, "utf8")) });
}
const result = composeServices(services);
if (compositionHasErrors(result)) {
  for (const error of result.errors) {
    console.error(`${error.extensions?.code ?? "ERROR"}: ${error.message}`);
  }
  process.exit(1);
}
process.stdout.write(result.supergraphSdl);
