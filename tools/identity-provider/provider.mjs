// The OpenID provider of the identity-provider tests (tests/api/test_oidc_provider.py):
//   node provider.mjs PORT KEYS_FILE
// KEYS_FILE holds the private JWKs it signs with (the first key's alg signs access tokens); the
// tests rotate them by restarting it with another file. Two clients: `autopay`, a service, by
// the client-credentials grant (scope payments:service); `web`, a customer's front end, by the
// authorization-code grant with PKCE, through the development login (any user id). Access
// tokens are JWTs for the resource `urn:loc-payments` (RFC 9068: `typ` at+jwt, `aud` the
// resource). State is in memory: a restart forgets sessions, not keys.
import fs from "node:fs";
import Provider from "oidc-provider";

const [port, keysFile] = process.argv.slice(2);
const issuer = `http://127.0.0.1:${port}`;
const RESOURCE = "urn:loc-payments";
const keys = JSON.parse(fs.readFileSync(keysFile, "utf8"));

const provider = new Provider(issuer, {
  clients: [
    { client_id: "autopay", client_secret: "autopay-secret", grant_types: ["client_credentials"], redirect_uris: [], response_types: [], scope: "payments:service", id_token_signed_response_alg: keys[0].alg },
    { client_id: "web", token_endpoint_auth_method: "none", grant_types: ["authorization_code"], redirect_uris: [`${issuer}/callback`], response_types: ["code"], scope: "openid payments:read", id_token_signed_response_alg: keys[0].alg },
  ],
  jwks: { keys },
  scopes: ["openid", "payments:read", "payments:service"],
  pkce: { required: () => true },
  features: {
    clientCredentials: { enabled: true },
    devInteractions: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => RESOURCE,
      useGrantedResource: () => true,
      getResourceServerInfo: () => ({
        scope: "payments:read payments:service",
        audience: RESOURCE,
        accessTokenFormat: "jwt",
        jwt: { sign: { alg: keys[0].alg } },
      }),
    },
  },
});
provider.listen(Number(port), "127.0.0.1", () => console.log(`listening ${issuer}`));
