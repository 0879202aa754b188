// Every audit of graphql-http's serverAudits against the GraphQL endpoint given as the first
// argument; prints one JSON array of {id, name, status, reason} (status: ok, warn or error).
import { serverAudits } from 'graphql-http';

const url = process.argv[2];
if (!url) {
  console.error('usage: node audit.mjs http://host:port/graphql');
  process.exit(2);
}

const results = [];
for (const { id, name, fn } of serverAudits({ url })) {
  const result = await fn();
  const reason = result.status === 'ok' ? null : result.reason;
  results.push({ id, name, status: result.status, reason });
}
console.log(JSON.stringify(results));
