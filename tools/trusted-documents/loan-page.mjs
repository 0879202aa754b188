#!/usr/bin/env node
// Reads a loan page with `history @defer` and the payments' `edges @stream(initialCount: 5)`
// from a running server through a real client, as an app configures it, and prints one JSON
// object: {client, accept, contentType, updates, data, errors}. `accept` is the Accept header
// the client sent and `contentType` the answer's, as a fetch wrapper saw them; `updates` the
// number of edges in each result the client handed the app (the page before its later parts,
// then after); `data` the client's final data. See --help.
import { parseArgs } from "node:util";

const HELP = `Usage: node loan-page.mjs --client NAME --url URL --token TOKEN --loan-id ID

Clients (NAME):
  apollo-defer20220824     Apollo Client 4, incrementalHandler: new Defer20220824Handler()
  apollo-graphql17alpha9   Apollo Client 4, incrementalHandler: new GraphQL17Alpha9Handler()
  urql                     @urql/core's Client with its fetchExchange (multipart built in)
  relay                    relay-runtime's Environment; its network layer reads the parts
                           with meros (artifacts from relay-compiler: npm run relay)

Exit status: 0 when the client read the whole page, 1 when it failed (stderr says why),
2 on bad usage.`;

// The clients may log in development mode: keep stdout for the JSON alone.
console.log = console.info = console.debug = console.warn = (...args) => console.error(...args);

function usage(message) {
  process.stderr.write(`loan-page.mjs: ${message}\n\n${HELP}\n`);
  process.exit(2);
}

let args;
try {
  ({ values: args } = parseArgs({
    options: {
      client: { type: "string" },
      url: { type: "string" },
      token: { type: "string" },
      "loan-id": { type: "string" },
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
if (!args.url || !args.token || !args["loan-id"]) usage("pass --url, --token and --loan-id");

export const LOAN_PAGE = `query LoanPage($loanId: ID!) {
  loan(loanId: $loanId) {
    id loanId
    payments(first: 20) {
      edges @stream(initialCount: 5, label: "edges") {
        cursor
        node {
          paymentId status amountCents
          ... @defer(label: "history") {
            history(first: 5) { edges { node { version toStatus } } }
          }
        }
      }
      pageInfo { hasNextPage endCursor }
    }
  }
}`;

const seen = { accept: null, contentType: null };
// The fetch each client is given: Node's, noting what was sent and answered.
async function recordingFetch(input, init) {
  const headers = new Headers(init?.headers);
  seen.accept = headers.get("accept");
  const response = await fetch(input, init);
  seen.contentType = response.headers.get("content-type");
  return response;
}

const variables = { loanId: args["loan-id"] };
const authorization = `Bearer ${args.token}`;
const edgesOf = (data) => data?.loan?.payments?.edges?.length ?? null;

async function apollo(handlerName) {
  const { ApolloClient, HttpLink, InMemoryCache, gql } = await import("@apollo/client");
  const incremental = await import("@apollo/client/incremental");
  const client = new ApolloClient({
    link: new HttpLink({ uri: args.url, headers: { authorization }, fetch: recordingFetch }),
    cache: new InMemoryCache(),
    incrementalHandler: new incremental[handlerName](),
  });
  const updates = [];
  return await new Promise((resolve, reject) => {
    const subscription = client
      .watchQuery({ query: gql(LOAN_PAGE), variables, fetchPolicy: "network-only" })
      .subscribe({
        next(result) {
          if (result.error) {
            subscription.unsubscribe();
            reject(result.error);
            return;
          }
          if (result.data === undefined || result.loading && result.dataState === "empty") return;
          updates.push(edgesOf(result.data));
          if (result.dataState === "complete") {
            subscription.unsubscribe();
            resolve({ updates, data: result.data, errors: null });
          }
        },
        error: reject,
      });
  });
}

async function urql() {
  const { Client, fetchExchange } = await import("@urql/core");
  const client = new Client({
    url: args.url,
    exchanges: [fetchExchange],
    fetch: recordingFetch,
    fetchOptions: { headers: { authorization } },
    requestPolicy: "network-only",
  });
  const updates = [];
  return await new Promise((resolve, reject) => {
    const { unsubscribe } = client.query(LOAN_PAGE, variables).subscribe((result) => {
      if (result.error) {
        reject(result.error);
        return;
      }
      updates.push(edgesOf(result.data));
      if (!result.hasNext) {
        resolve({ updates, data: result.data, errors: null });
        setImmediate(() => unsubscribe());
      }
    });
  });
}

async function relay() {
  const { relayLoanPage } = await import("./src/relay-loan-page/client.mjs");
  return await relayLoanPage({ url: args.url, authorization, variables, fetch: recordingFetch });
}

const CLIENTS = {
  "apollo-defer20220824": () => apollo("Defer20220824Handler"),
  "apollo-graphql17alpha9": () => apollo("GraphQL17Alpha9Handler"),
  urql,
  relay,
};

const run = CLIENTS[args.client];
if (!run) usage(`no client ${args.client}: one of ${Object.keys(CLIENTS).join(", ")}`);
try {
  const read = await run();
  process.stdout.write(`${JSON.stringify({ client: args.client, ...seen, ...read })}\n`);
  process.exit(0);
} catch (error) {
  process.stderr.write(`loan-page.mjs: ${args.client} failed: ${error?.stack ?? error}\n`);
  process.exit(1);
}
