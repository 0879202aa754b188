#!/usr/bin/env node
// Drives Apollo Client's persisted-query link (automatic persisted queries, APQ)
// against a running server: runs the LoanPayments query of src/apollo/operations.js
// twice and prints, as one JSON object on stdout, every HTTP request the link sent
// and both results. See --help.
import { createHash } from "node:crypto";
import { parseArgs } from "node:util";

import { ApolloClient, HttpLink, InMemoryCache } from "@apollo/client";
import { PersistedQueryLink } from "@apollo/client/link/persisted-queries";

import { LOAN_PAYMENTS } from "./src/apollo/operations.js";

const HELP = `Usage: node apq.mjs [options]

Runs the LoanPayments query twice through Apollo Client's PersistedQueryLink
(the second run with fetchPolicy "network-only") and prints one JSON object:
  {"requests": [{method, url, queryText, operationName, sha256Hash, status, body}, ...],
   "results":  [{data, error}, {data, error}]}
Against a server with APQ the requests are: hash only -> PERSISTED_QUERY_NOT_FOUND,
hash + text -> data, hash only -> data.

Options (each falls back to the environment variable named):
  --url URL          the GraphQL endpoint, e.g. http://127.0.0.1:8000/graphql  (APQ_URL)
  --token TOKEN      sent as "Authorization: Bearer TOKEN"; none if empty       (APQ_TOKEN)
  --user-id ID       the userId variable                                        (APQ_USER_ID)
  --loan-id ID       the loanId variable                                        (APQ_LOAN_ID)
  --get              send hash-only queries as GET (useGETForHashedQueries: true)
  -h, --help         this text

Exit status: 0 when every request got an HTTP answer (whatever it said), 1 when a
request could not be sent (e.g. connection refused: see stderr), 2 on bad usage.`;

// Apollo Client may log in development mode: keep stdout for the JSON alone.
console.log = console.info = console.debug = (...args) => console.error(...args);

function usage(message) {
  process.stderr.write(`apq.mjs: ${message}\n\n${HELP}\n`);
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
      get: { type: "boolean", default: false },
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

const url = args.url ?? process.env.APQ_URL;
const token = args.token ?? process.env.APQ_TOKEN ?? "";
const userId = args["user-id"] ?? process.env.APQ_USER_ID;
const loanId = args["loan-id"] ?? process.env.APQ_LOAN_ID;
if (!url) usage("no server URL: pass --url or set APQ_URL");
if (!userId || !loanId) usage("pass --user-id and --loan-id (or set APQ_USER_ID, APQ_LOAN_ID)");

const requests = [];
let unreachable = null;

function parseJson(text) {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

// What the link put in the request: the GraphQL parameters from the JSON body
// (POST) or the query string (GET).
function describeRequest(input, init) {
  const method = (init?.method ?? "GET").toUpperCase();
  const requestUrl = String(input);
  let params = {};
  if (typeof init?.body === "string") {
    params = parseJson(init.body) ?? {};
  } else {
    const search = new URL(requestUrl).searchParams;
    for (const key of ["query", "operationName", "variables", "extensions"]) {
      if (search.has(key)) {
        const raw = search.get(key);
        params[key] = key === "query" || key === "operationName" ? raw : (parseJson(raw) ?? raw);
      }
    }
  }
  const persisted = params.extensions?.persistedQuery;
  return {
    method,
    url: requestUrl,
    queryText: typeof params.query === "string" && params.query.length > 0,
    operationName: params.operationName ?? null,
    sha256Hash: persisted?.sha256Hash ?? null,
    persistedQueryVersion: persisted?.version ?? null,
  };
}

async function recordingFetch(input, init) {
  const entry = describeRequest(input, init);
  requests.push(entry);
  let response;
  try {
    response = await fetch(input, init);
  } catch (error) {
    const cause = error?.cause;
    entry.status = null;
    entry.error = cause?.code ?? cause?.message ?? error?.message ?? String(error);
    unreachable ??= `cannot reach ${entry.url}: ${entry.error}`;
    throw error;
  }
  const text = await response.clone().text();
  entry.status = response.status;
  entry.contentType = response.headers.get("content-type");
  entry.body = parseJson(text) ?? text;
  return response;
}

const sha256 = (text) => createHash("sha256").update(text).digest("hex");

const link = new PersistedQueryLink({ sha256, useGETForHashedQueries: args.get }).concat(
  new HttpLink({
    uri: url,
    fetch: recordingFetch,
    headers: token ? { authorization: `Bearer ${token}` } : {},
  }),
);
const client = new ApolloClient({ link, cache: new InMemoryCache() });

function describeError(error) {
  if (!error) return null;
  const described = { name: error.name ?? null, message: error.message ?? String(error) };
  if (Array.isArray(error.errors)) described.errors = error.errors;
  if (typeof error.statusCode === "number") described.statusCode = error.statusCode;
  return described;
}

const results = [];
for (let run = 0; run < 2; run += 1) {
  try {
    const { data, error } = await client.query({
      query: LOAN_PAYMENTS,
      variables: { userId, loanId },
      fetchPolicy: "network-only",
      errorPolicy: "all",
    });
    results.push({ data: data ?? null, error: describeError(error) });
  } catch (error) {
    results.push({ data: null, error: describeError(error) });
  }
}
client.stop();

process.stdout.write(`${JSON.stringify({ requests, results }, null, 2)}\n`);
if (unreachable) {
  process.stderr.write(`apq.mjs: ${unreachable}\n`);
  process.exitCode = 1;
}
