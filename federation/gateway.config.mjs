// Hive Gateway's configuration for the payments graph (the federation tests use it as it is):
// - the client's Authorization header goes to every subgraph, so each serves the request as the
//   client's own; so does X-Debug-DynamoDB (which the payments service honours outside prod);
// - the subgraphs' `extensions.dynamodb` reports, which a gateway drops by default, are added up
//   into the client's response: the DynamoDB calls the whole operation made.
import { defineConfig } from "@graphql-hive/gateway";

const FORWARDED = ["authorization", "x-debug-dynamodb"];

export const gatewayConfig = defineConfig({
  propagateHeaders: {
    fromClientToSubgraphs({ request }) {
      return Object.fromEntries(
        FORWARDED.filter((name) => request.headers.has(name)).map((name) => [
          name,
          request.headers.get(name),
        ]),
      );
    },
  },
  plugins: () => [dynamodbReports()],
});

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
