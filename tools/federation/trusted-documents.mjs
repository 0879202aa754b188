// The trusted documents the gateway runs in prod (SPEC §14, §15): read from the same manifest
// formats the payments service reads (LOC_TRUSTED_DOCUMENTS there, GATEWAY_TRUSTED_DOCUMENTS
// here; engine/trusted_documents.py): Apollo's persisted query manifest, Relay's and GraphQL
// Code Generator's id-to-text maps, a directory meaning each *.json in it.
//
// A client names one by `documentId` ("sha256:<hex>" of its text, or its manifest id) or by
// Apollo's `extensions.persistedQuery.sha256Hash`: the keys of the map `trustedDocuments` returns.
// A manifest that cannot be read, or an id that is not its text's hash, stops the gateway.
import { createHash } from "node:crypto";
import { readFileSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";

const APOLLO_FORMAT = "apollo-persisted-query-manifest";
const HASHES = { 32: "md5", 40: "sha1", 64: "sha256" };

export function trustedDocuments(paths) {
  const documents = new Map();
  for (const file of paths.flatMap(manifestFiles)) {
    for (const [id, text] of entries(file)) {
      checkHash(file, id, text);
      const sha256 = digest("sha256", text);
      for (const key of [id, sha256, `sha256:${sha256}`]) documents.set(key, text);
    }
  }
  return documents;
}

function manifestFiles(path) {
  if (!statSync(path).isDirectory()) return [path];
  return readdirSync(path)
    .filter((name) => name.endsWith(".json"))
    .sort()
    .map((name) => join(path, name));
}

function entries(file) {
  const data = JSON.parse(readFileSync(file, "utf8"));
  if (data === null || typeof data !== "object" || Array.isArray(data)) {
    throw new Error(`${file}: neither a manifest object nor an id-to-text map`);
  }
  if (!("format" in data)) {
    return Object.entries(data).map(([id, text]) => {
      if (!id || typeof text !== "string") throw new Error(`${file}: ${id}: not an id and a text`);
      return [id, text];
    });
  }
  if (data.format !== APOLLO_FORMAT || data.version !== 1 || !Array.isArray(data.operations)) {
    throw new Error(`${file}: expected "${APOLLO_FORMAT}" version 1 with a list of operations`);
  }
  return data.operations.map((operation, index) => {
    if (typeof operation?.id !== "string" || !operation.id || typeof operation.body !== "string") {
      throw new Error(`${file}: operations[${index}] needs a string id and body`);
    }
    return [operation.id, operation.body];
  });
}

// An id of 32, 40 or 64 hex digits (or sha256:<hex>) is a hash and must be its text's.
function checkHash(file, id, text) {
  const hex = id.startsWith("sha256:") ? id.slice("sha256:".length) : id;
  const algorithm = hex !== id ? "sha256" : HASHES[hex.length];
  if (algorithm === undefined || !/^[0-9a-fA-F]+$/.test(hex)) return; // a custom id
  if (digest(algorithm, text) !== hex.toLowerCase()) {
    throw new Error(`${file}: ${id}: the id is not the ${algorithm} of its document`);
  }
}

function digest(algorithm, text) {
  return createHash(algorithm).update(text).digest("hex");
}
