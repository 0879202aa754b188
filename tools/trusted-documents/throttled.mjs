#!/usr/bin/env node
// Drives Apollo Client against a running server until its caller's budget is spent
// (SPEC §21): runs the LoanPayments query of src/apollo/operations.js --requests times
// and prints, as one JSON object on stdout, what the app would see of each answer:
// what Apollo Client surfaced (the error's class and each GraphQL error's
// extensions.code), and, read through a link from the answer Apollo Client kept in the
// operation's context, the HTTP status, the Retry-After header and extensions.cost.
// See --help.
import { parseArgs } from "node:util";

import { ApolloClient, ApolloLink, HttpLink, InMemoryCache } from "@apollo/client";
import { tap } from "rxjs";

import { LOAN_PAYMENTS } from "./src/apollo/operations.js";

const HELP = `Usage: node throttled.mjs [options]

Runs the LoanPayments query --requests times through Apollo Client (fetchPolicy
"network-only", errorPolicy "all") and prints one JSON object:
  {"runs": [{status, retryAfter, cost, error: {name, message, codes, statusCode,
             retryAfter} | null}, ...]}
status, retryAfter and cost are read by a link from operation.getContext().response
(the answer HttpLink kept) and the result's extensions, as an app that paces itself
would read them; error is what client.query returned.

Options:
  --url URL          the GraphQL endpoint, e.g. http://127.0.0.1:8000/graphql
  --token TOKEN      sent as "Authorization: Bearer TOKEN"
  --user-id ID       the userId variable
  --loan-id ID       the loanId variable
  --requests N       how many times to run the query (default 5)
  --accept TYPE      the Accept header (default: Apollo Client's own, which prefers
                     application/graphql-response+json)
  -h, --help         this text

Exit status: 0 when every request got an HTTP answer (whatever it said), 1 when a
request could not be sent (e.g. connection refused: see stderr), 2 on bad usage.`;

// Apollo Client may log in development mode: keep stdout for the JSON alone.
console.log = console.info = console.debug = (...args) => console.error(...args);

function usage(message) {
  process.stderr.write(`throttled.mjs: ${message}\n\n${HELP}\n`);
  process.exit(2);
}

let args;
try {
  ({ values: args } = parseArgs({
    options: {
      url: { type: "string" },
      token: { type: "string" },
      "user-id": { type: "string" },
      "loan-id": { type: "string" },
      requests: { type: "string", default: "5" },
      accept: { type: "string" },
      help: { type: "boolean", short: "h", default: false },
    },
  }));
} catch (error) {
  usage(error.message);
}
if (args.help) {
  process.stdout.write(`${HELP}\n`);
  process.exit(0);
}
const requests = Number.parseInt(args.requests, 10);
if (!args.url) usage("no server URL: pass --url");
if (!args["user-id"] || !args["loan-id"]) usage("pass --user-id and --loan-id");
if (!(requests > 0)) usage(`--requests must be a positive integer, not ${args.requests}`);

// What the link read of each answer, in order; one entry a run.
const answers = [];
let unreachable = null;

function answered(operation, result) {
  const response = operation.getContext().response;
  answers.push({
    status: response?.status ?? null,
    retryAfter: response?.headers?.get("retry-after") ?? null,
    cost: result?.extensions?.cost ?? null,
  });
}

const observe = new ApolloLink((operation, forward) =>
  forward(operation).pipe(
    tap({
      next: (result) => answered(operation, result),
      error: (error) => {
        if (operation.getContext().response) answered(operation, null);
        else unreachable ??= error?.cause?.code ?? error?.message ?? String(error);
      },
    }),
  ),
);

const headers = { authorization: `Bearer ${args.token ?? ""}` };
if (args.accept) headers.accept = args.accept;
const client = new ApolloClient({
  link: observe.concat(new HttpLink({ uri: args.url, headers })),
  cache: new InMemoryCache(),
});

function parseJson(text) {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

// The error as an app's code meets it: CombinedGraphQLErrors carries the GraphQL errors;
// ServerError (a non-2xx answer in application/json) the status, the headers and the body.
function describeError(error) {
  if (!error) return null;
  const errors = error.errors ?? parseJson(error.bodyText ?? "")?.errors ?? [];
  return {
    name: error.name ?? null,
    message: error.message ?? String(error),
    codes: errors.map((each) => each?.extensions?.code ?? null),
    statusCode: error.statusCode ?? null,
    retryAfter: error.response?.headers?.get("retry-after") ?? null,
  };
}

const runs = [];
for (let run = 0; run < requests; run += 1) {
  let error = null;
  try {
    ({ error } = await client.query({
      query: LOAN_PAYMENTS,
      variables: { userId: args["user-id"], loanId: args["loan-id"] },
      fetchPolicy: "network-only",
      errorPolicy: "all",
    }));
  } catch (thrown) {
    error = thrown;
  }
  runs.push({ ...(answers[run] ?? {}), error: describeError(error) });
}
client.stop();

process.stdout.write(`${JSON.stringify({ runs }, null, 2)}\n`);
if (unreachable) {
  process.stderr.write(`throttled.mjs: cannot reach ${args.url}: ${unreachable}\n`);
  process.exitCode = 1;
}
