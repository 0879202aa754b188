// The Node.js peer of `make bench` (bench/local_pass.py): what a team would write instead of the
// service for the benchmark's reads, in Node.js. GraphQL Yoga on `schema.graphql` with
// graphql-jit compiling each document (@envelop/graphql-jit), the AWS SDK v3 with a keep-alive
// agent and `unmarshall`, a DataLoader per request for lookups (one GetItem for one key, a
// BatchGetItem for more), the caller's HS256 token verified by jose on every request, and the
// service's own Query for a page (its BETWEEN range, one item more than the page) with the same
// signed cursors, so that its answers carry the same `data`.
//
//   node bench/peers/node/server.mjs --port N --endpoint URL --table NAME --region R \
//     --jwt-secret S --cursor-secret S

import { createHmac } from "node:crypto";
import { readFileSync } from "node:fs";
import { Agent, createServer } from "node:http";
import { parseArgs } from "node:util";

import { BatchGetItemCommand, DynamoDBClient, GetItemCommand, QueryCommand } from "@aws-sdk/client-dynamodb";
import { unmarshall } from "@aws-sdk/util-dynamodb";
import { useGraphQlJit } from "@envelop/graphql-jit";
import { NodeHttpHandler } from "@smithy/node-http-handler";
import DataLoader from "dataloader";
import { GraphQLError } from "graphql";
import { createSchema, createYoga } from "graphql-yoga";
import { jwtVerify } from "jose";

const { values: options } = parseArgs({
  options: {
    port: { type: "string" },
    endpoint: { type: "string" },
    table: { type: "string" },
    region: { type: "string" },
    "jwt-secret": { type: "string" },
    "cursor-secret": { type: "string" },
  },
});
const TABLE = options.table;
const JWT_SECRET = new TextEncoder().encode(options["jwt-secret"]);
const CURSOR_SECRET = options["cursor-secret"];
const DEFAULT_PAGE = 20;
const MAX_PAGE = 100;

const db = new DynamoDBClient({
  region: options.region,
  endpoint: options.endpoint,
  credentials: { accessKeyId: "testkey", secretAccessKey: "testkey" },
  requestHandler: new NodeHttpHandler({ httpAgent: new Agent({ keepAlive: true, maxSockets: 64 }) }),
});

// The service's cursors (datasource/cursors.py): base64url(key values + HMAC-SHA256 over the list
// and the values).
const PAGE_KEYS = { table: ["PK", "SK"], GSI2: ["GSI2PK", "GSI2SK", "PK", "SK"] };

function cursor(scope, item) {
  const payload = JSON.stringify(PAGE_KEYS[scope[0] ?? "table"].map((name) => item[name].S));
  const signed = `[${scope.map((value) => JSON.stringify(value)).join(", ")}]`;
  const mac = createHmac("sha256", CURSOR_SECRET)
    .update(`loc-payments-cursor/1\u0000${signed}\u0000${payload}`)
    .digest();
  return Buffer.concat([Buffer.from(payload), mac]).toString("base64url");
}

function startKey(scope, after) {
  const raw = Buffer.from(after, "base64url");
  const payload = raw.subarray(0, raw.length - 32).toString();
  const item = Object.fromEntries(
    PAGE_KEYS[scope[0] ?? "table"].map((name, index) => [name, { S: JSON.parse(payload)[index] }]),
  );
  if (cursor(scope, item) !== after) throw new GraphQLError("invalid cursor");
  return item;
}

async function page(scope, key, first, after) {
  first = first ?? DEFAULT_PAGE;
  if (first < 1 || first > MAX_PAGE) throw new GraphQLError(`first: must be between 1 and ${MAX_PAGE}`);
  const [pk, sk, partition, prefix] = key;
  const parameters = {
    TableName: TABLE,
    KeyConditionExpression: "#pk = :pk AND #sk BETWEEN :prefix AND :end",
    ExpressionAttributeNames: { "#pk": pk, "#sk": sk },
    ExpressionAttributeValues: {
      ":pk": { S: partition },
      ":prefix": { S: prefix },
      ":end": { S: `${prefix.slice(0, -1)}$` },
    },
    ScanIndexForward: false,
    Limit: first + 1,
  };
  if (scope[0] !== null) parameters.IndexName = scope[0];
  if (after) parameters.ExclusiveStartKey = startKey(scope, after);
  const items = (await db.send(new QueryCommand(parameters))).Items ?? [];
  const listed = items.slice(0, first);
  return {
    edges: listed.map((item) => ({ item, node: unmarshall(item), scope })),
    pageInfo: {
      hasNextPage: items.length > first,
      hasPreviousPage: false,
      startCursor: listed.length ? cursor(scope, listed[0]) : null,
      endCursor: listed.length ? cursor(scope, listed[listed.length - 1]) : null,
    },
  };
}

function paymentKey(userId, loanId, paymentId) {
  return { PK: { S: `USER#${userId}` }, SK: { S: `LOAN#${loanId}#PAYMENT#${paymentId}` } };
}

// Lookups of one request: one GetItem for one key, one BatchGetItem for up to 100.
async function lookups(keys) {
  if (keys.length === 1) {
    const found = await db.send(
      new GetItemCommand({ TableName: TABLE, Key: paymentKey(...keys[0]), ConsistentRead: false }),
    );
    return [found.Item ? unmarshall(found.Item) : null];
  }
  const answer = await db.send(
    new BatchGetItemCommand({ RequestItems: { [TABLE]: { Keys: keys.map((key) => paymentKey(...key)) } } }),
  );
  const byKey = new Map(
    (answer.Responses?.[TABLE] ?? []).map((item) => [`${item.PK.S}|${item.SK.S}`, unmarshall(item)]),
  );
  return keys.map((key) => {
    const { PK, SK } = paymentKey(...key);
    return byKey.get(`${PK.S}|${SK.S}`) ?? null;
  });
}

function service(context) {
  if (!context.caller.scope?.split(" ").includes("payments:service")) {
    throw new GraphQLError("this field is for services only");
  }
}

const resolvers = {
  Query: {
    payment: (_, { userId, loanId, paymentId }, context) =>
      context.payments.load([userId ?? context.caller.sub, loanId, paymentId]),
    loan: (_, { userId, loanId }, context) => ({ userId: userId ?? context.caller.sub, loanId }),
    paymentsByStatus: (_, { status, first, after }, context) => {
      service(context);
      return page(["GSI2", null, null, status], ["GSI2PK", "GSI2SK", "PAYMENT", `STATUS#${status}#`], first, after);
    },
  },
  Loan: {
    payments: (loan, { first, after }) =>
      page([null, loan.userId, loan.loanId, null], ["PK", "SK", `USER#${loan.userId}`, `LOAN#${loan.loanId}#PAYMENT#`], first, after),
  },
  PaymentEdge: { cursor: (edge) => cursor(edge.scope, edge.item) },
  Payment: {
    paymentId: (p) => p.loc_payment_id,
    userId: (p) => p.loc_user_id,
    loanId: (p) => p.loc_loan_id,
    amountCents: (p) => p.loc_amount,
    status: (p) => p.loc_status,
    method: (p) => p.loc_payment_method,
    process: (p) => p.loc_process,
    confirmationId: (p) => p.loc_confirmation_id ?? null,
    accountLastFour: (p) => p.loc_account_last_four ?? null,
    intendedInstallmentId: (p) => p.loc_intended_installment_id ?? null,
    attempts: (p) => p.loc_payment_attempts,
    updateReason: (p) => p.loc_update_reason,
    returnCode: (p) => p.loc_return_code ?? null,
    version: (p) => p.loc_version,
    createdAt: (p) => p.loc_created_date,
    updatedAt: (p) => p.loc_last_updated,
    firstPresentedAt: (p) => p.loc_first_presented_date ?? null,
    completedAt: (p) => p.loc_completed_date ?? null,
  },
  PaymentMethod: { ACH: "ach", PINLESS: "pinless" },
};

const yoga = createYoga({
  schema: createSchema({
    typeDefs: readFileSync(new URL("../../../schema.graphql", import.meta.url), "utf8"),
    resolvers,
  }),
  plugins: [useGraphQlJit()],
  graphiql: false,
  landingPage: false,
  logging: false,
  context: async ({ request }) => {
    const header = request.headers.get("authorization") ?? "";
    let caller;
    try {
      caller = (await jwtVerify(header.replace(/^Bearer /, ""), JWT_SECRET, { algorithms: ["HS256"] }))
        .payload;
    } catch {
      throw new GraphQLError("unauthenticated", { extensions: { http: { status: 401 } } });
    }
    return { caller, payments: new DataLoader(lookups, { cacheKeyFn: (key) => key.join("|") }) };
  },
});

createServer(yoga).listen(Number(options.port), "127.0.0.1");

// SIGTERM ends it through process.exit, so that `node --cpu-prof` writes its profile as it
// exits (`python -m bench.saturation --cpu-prof`); the signal's default ends it without one.
process.on("SIGTERM", () => process.exit(0));
