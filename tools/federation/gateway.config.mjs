// Hive Gateway's configuration for the payments graph (the federation tests use it as it is):
// - the client's Authorization header goes to every subgraph, so each serves the request as the
//   client's own; so does X-Debug-DynamoDB (which the payments service honours outside prod);
// - with GATEWAY_TOKEN_FILE (prod), the payments subgraph gets the gateway's own token instead (a
//   token with the payments:gateway scope, read from the file at each request, so whatever renews
//   it needs no restart) and the client's Authorization in X-Forwarded-Authorization: `/subgraph`
//   runs the gateway's query plans (text) for it alone, as the forwarded client (SPEC §15);
// - with GATEWAY_TRUSTED_DOCUMENTS (prod; manifests, comma-separated, in the formats of the
//   service's LOC_TRUSTED_DOCUMENTS), a client names a trusted document (`documentId` or Apollo's
//   persisted query hash) and text from any client is refused (DOCUMENT_NOT_TRUSTED);
// - the subgraphs' `extensions.dynamodb` reports, which a gateway drops by default, are added up
//   into the client's response: the DynamoDB calls the whole operation made;
// - `@defer` and `@stream` (`deferStream`): the gateway answers a client that reads
//   multipart/mixed in parts itself, fetching each deferred fragment from its subgraph by the
//   entity's key. The key must be selected outside the fragment (a payment's `id`, a loan's
//   `userId loanId`): without it the gateway sends no key and the part comes back null with an
//   error (docs/incremental-delivery.md, "Through the federation gateway").
import { readFile } from "node:fs/promises";
import { defineConfig } from "@graphql-hive/gateway";
import { trustedDocuments } from "./trusted-documents.mjs";

const FORWARDED = ["authorization", "x-debug-dynamodb"];
// The subgraph that takes the gateway's credential (its name in compose.mjs's arguments).
const PAYMENTS = "payments";
const FORWARDED_AUTHORIZATION = "x-forwarded-authorization";
const TOKEN_FILE = process.env.GATEWAY_TOKEN_FILE;
const MANIFESTS = (process.env.GATEWAY_TRUSTED_DOCUMENTS ?? "").split(",").filter(Boolean);

export const gatewayConfig = defineConfig({
  deferStream: true,
  propagateHeaders: {
    async fromClientToSubgraphs({ request, subgraphName }) {
      const headers = Object.fromEntries(
        FORWARDED.filter((name) => request.headers.has(name)).map((name) => [
          name,
          request.headers.get(name),
        ]),
      );
      if (TOKEN_FILE && subgraphName === PAYMENTS) {
        const { authorization, ...rest } = headers;
        const token = (await readFile(TOKEN_FILE, "utf8")).trim();
        return {
          ...rest,
          authorization: `Bearer ${token}`,
          ...(authorization ? { [FORWARDED_AUTHORIZATION]: authorization } : {}),
        };
      }
      return headers;
    },
  },
  ...(MANIFESTS.length > 0 ? { persistedDocuments: persistedDocuments(MANIFESTS) } : {}),
  plugins: () => [dynamodbReports()],
});

// Only trusted documents run: an id the manifests do not hold, or text, is refused with the
// payments service's own codes.
function persistedDocuments(manifests) {
  const documents = trustedDocuments(manifests);
  return {
    getPersistedOperation: (id) => documents.get(id) ?? null,
    allowArbitraryDocuments: false,
    customErrors: {
      notFound: {
        message: "No trusted document has this id.",
        extensions: { code: "PERSISTED_QUERY_NOT_IN_LIST" },
      },
      persistedQueryOnly: {
        message: "Name a trusted document (documentId), not its text.",
        extensions: { code: "DOCUMENT_NOT_TRUSTED" },
      },
    },
  };
}

// The payments service's reports of one client operation, by its context, added up.
function dynamodbReports() {
  const reports = new WeakMap();
  return {
    onSubgraphExecute({ executionRequest }) {
      const context = executionRequest.context;
      return ({ result }) => {
        const report = result?.extensions?.dynamodb;
        if (context && report) reports.set(context, added(reports.get(context), report));
      };
    },
    onExecute({ args }) {
      return {
        onExecuteDone({ result, setResult }) {
          const report = reports.get(args.contextValue);
          if (report && !(Symbol.asyncIterator in result)) {
            setResult({ ...result, extensions: { ...result.extensions, dynamodb: report } });
          }
        },
      };
    },
  };
}

// Two reports added field by field: counts and capacity units summed (units to the hundredth).
function added(total, report) {
  if (total === undefined) return report;
  const sum = { ...total };
  for (const [key, value] of Object.entries(report)) {
    if (typeof value === "number") {
      sum[key] = Math.round(((sum[key] ?? 0) + value) * 100) / 100;
    } else if (value && typeof value === "object") {
      sum[key] = added(sum[key] ?? {}, value);
    }
  }
  return sum;
}
