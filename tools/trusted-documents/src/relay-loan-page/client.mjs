// relay-runtime reading the loan page in parts: a network layer that reads the multipart answer
// with meros (as Relay's incremental-delivery examples do) and hands Relay each part in the shape
// its executor takes: the first payload, then one response per deferred fragment ({data, label,
// path}) and per streamed item ({data: item, label, path: [..., index]}), the last marked
// extensions.is_final. The server's 2022-08-24 format names each part's path and label, which is
// what Relay needs, so the Accept header asks for it.
import { meros } from "meros/browser";
import {
  Environment,
  Network,
  Observable,
  RecordSource,
  Store,
  createOperationDescriptor,
  getRequest,
  getSelector,
} from "relay-runtime";

import loanPageQuery from "./__generated__/loanPageQuery.graphql.js";
import loanPageHistory from "./__generated__/loanPage_history.graphql.js";

export const ACCEPT = "multipart/mixed;deferSpec=20220824, application/json";

function* relayResponses(payload) {
  const extensions = payload.hasNext === false ? { is_final: true } : undefined;
  if (!("incremental" in payload)) {
    if ("data" in payload) yield { data: payload.data, errors: payload.errors, extensions };
    return;
  }
  for (const part of payload.incremental) {
    if ("items" in part) {
      const start = part.path.at(-1);
      for (const [offset, item] of (part.items ?? []).entries()) {
        const path = [...part.path.slice(0, -1), start + offset];
        yield { data: item, label: part.label, path, errors: part.errors, extensions };
      }
    } else {
      yield { data: part.data, label: part.label, path: part.path, errors: part.errors, extensions };
    }
  }
}

function network({ url, authorization, fetch }) {
  return Network.create((params, variables) =>
    Observable.create((sink) => {
      (async () => {
        const response = await fetch(url, {
          method: "POST",
          headers: { authorization, "content-type": "application/json", accept: ACCEPT },
          body: JSON.stringify({ query: params.text, variables }),
        });
        const parts = await meros(response);
        if (!(Symbol.asyncIterator in parts)) {
          sink.next(await parts.json());
          sink.complete();
          return;
        }
        for await (const part of parts) {
          if (!part.json) throw new Error(`a part that is not JSON: ${part.body}`);
          for (const relayResponse of relayResponses(part.body)) sink.next(relayResponse);
        }
        sink.complete();
      })().catch((error) => sink.error(error));
    })
  );
}

// The query's data with each payment's deferred fragment read in place, as the app's components
// would read it: what the plain query answers.
function pageData(environment, operation) {
  const data = environment.lookup(operation.fragment).data;
  if (!data?.loan) return data;
  const edges = data.loan.payments.edges.map(({ cursor, node }) => {
    // Relay's own keys (the fragment's reference) are not the app's data.
    const own = Object.fromEntries(
      Object.entries(node).filter(([key]) => !key.startsWith("__") && !key.startsWith(" "))
    );
    const history = environment.lookup(getSelector(loanPageHistory, node))?.data;
    return { cursor, node: { ...own, ...(history ?? {}) } };
  });
  return { loan: { ...data.loan, payments: { ...data.loan.payments, edges } } };
}

export async function relayLoanPage({ url, authorization, variables, fetch }) {
  const environment = new Environment({
    network: network({ url, authorization, fetch }),
    store: new Store(new RecordSource()),
  });
  const operation = createOperationDescriptor(getRequest(loanPageQuery), variables);
  const updates = [];
  await new Promise((resolve, reject) => {
    environment.execute({ operation }).subscribe({
      next() {
        updates.push(environment.lookup(operation.fragment).data?.loan?.payments?.edges?.length ?? null);
      },
      error: reject,
      complete: resolve,
    });
  });
  return { updates, data: pageData(environment, operation), errors: null };
}
