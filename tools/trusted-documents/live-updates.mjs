#!/usr/bin/env node
// Subscribes to paymentEvents with the graphql-ws client, configured as an app configures it:
// it reconnects after any close and sends its subscriptions again, each payment's with the
// afterVersion of the last event it got. Prints one JSON line per thing that happened. See --help.
import { parseArgs } from "node:util";

import { createClient } from "graphql-ws";
import WebSocket from "ws";

const HELP = `Usage: node live-updates.mjs --url URL [--token TOKEN] --subscribe NAME=VARIABLES ...

Opens one graphql-transport-ws connection (graphql-ws's createClient: retryAttempts 20,
shouldRetry () => true, 100 ms between tries) and subscribes to

  subscription PaymentEvents($userId: ID, $loanId: ID, $paymentId: ID, $afterVersion: Int)

once for each --subscribe, with VARIABLES (a JSON object) as its variables. A subscription
with afterVersion moves it to each event's version as the event arrives: graphql-ws sends
the same payload again when it resubscribes after a close.

Prints one JSON object a line, as things happen:
  {"connected": N}                     the Nth connection was acknowledged
  {"closed": CODE, "reason": TEXT}     the socket closed (graphql-ws then retries)
  {"name": NAME, "version": V, "paymentId": ID}    an event
  {"name": NAME, "errors": [...]}      a result with errors
  {"name": NAME, "error": TEXT}        the subscription failed (no more retries)
  {"name": NAME, "complete": true}     the server completed it: graphql-ws released it

Options:
  --url URL            the WebSocket endpoint, e.g. ws://127.0.0.1:8000/graphql
  --token TOKEN        sent in connection_init as "Authorization: Bearer TOKEN"
  --subscribe N=JSON   a subscription's name and variables (repeatable)
  -h, --help           this text

Runs until it is signalled (SIGTERM or SIGINT), then closes the connection. Exit 2 on
bad usage.`;

const DOCUMENT = `subscription PaymentEvents($userId: ID, $loanId: ID, $paymentId: ID, $afterVersion: Int) {
  paymentEvents(userId: $userId, loanId: $loanId, paymentId: $paymentId, afterVersion: $afterVersion) {
    version
    payment { paymentId }
  }
}`;

function usage(message) {
  process.stderr.write(`live-updates.mjs: ${message}\n\n${HELP}\n`);
  process.exit(2);
}

let args;
try {
  ({ values: args } = parseArgs({
    options: {
      url: { type: "string" },
      token: { type: "string", default: "" },
      subscribe: { type: "string", multiple: true, default: [] },
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
if (!args.url) usage("no endpoint: pass --url");
if (args.subscribe.length === 0) usage("nothing to subscribe to: pass --subscribe NAME=JSON");

const subscriptions = args.subscribe.map((option) => {
  const split = option.indexOf("=");
  if (split < 1) usage(`--subscribe ${option}: expected NAME=JSON`);
  try {
    return [option.slice(0, split), JSON.parse(option.slice(split + 1))];
  } catch (error) {
    return usage(`--subscribe ${option}: ${error.message}`);
  }
});

function describe(error) {
  if (Array.isArray(error)) return JSON.stringify(error);
  if (error instanceof Error) return error.message;
  return `closed ${error?.code}: ${error?.reason}`;
}

const print = (line) => process.stdout.write(`${JSON.stringify(line)}\n`);

let connections = 0;
const client = createClient({
  url: args.url,
  webSocketImpl: WebSocket, // Node 20 has no WebSocket of its own
  connectionParams: args.token ? { Authorization: `Bearer ${args.token}` } : {},
  retryAttempts: 20,
  shouldRetry: () => true,
  retryWait: () => new Promise((resolve) => setTimeout(resolve, 100)),
  on: {
    connected: () => print({ connected: ++connections }),
    closed: (event) => print({ closed: event.code, reason: event.reason }),
  },
});

for (const [name, variables] of subscriptions) {
  const payload = { query: DOCUMENT, variables: { ...variables } };
  client.subscribe(payload, {
    next: ({ data, errors }) => {
      if (errors) {
        print({ name, errors });
        return;
      }
      const event = data.paymentEvents;
      if (payload.variables.afterVersion != null) {
        payload.variables.afterVersion = Math.max(payload.variables.afterVersion, event.version);
      }
      print({ name, version: event.version, paymentId: event.payment.paymentId });
    },
    // An error message's GraphQL errors, a close it does not retry, or what went wrong.
    error: (error) => print({ name, error: describe(error) }),
    complete: () => print({ name, complete: true }),
  });
}

// Disposing completes every subscription: nothing is printed after the signal.
for (const signal of ["SIGTERM", "SIGINT"]) {
  process.on(signal, () => {
    client.dispose();
    process.exit(0);
  });
}
