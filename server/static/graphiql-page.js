// GraphiQL as the service serves it: every file from the service itself (server/graphiql.py).
// The page's settings come in a JSON block (#graphiql-settings), not in a script, so the
// Content-Security-Policy allows no inline script at all.
(function () {
  "use strict";
  const settings = JSON.parse(document.getElementById("graphiql-settings").textContent);
  const url = new URL(settings.endpoint, window.location.href);
  const subscriptionUrl = new URL(url);
  subscriptionUrl.protocol = url.protocol === "https:" ? "wss:" : "ws:";

  // The Headers tab's current text: HTTP requests carry its headers, and a subscription's
  // socket sends its Authorization in `connection_init` (WebSockets take no headers).
  let headersText = settings.headers || "";
  function authorization() {
    try {
      const headers = JSON.parse(headersText || "{}");
      return headers.Authorization ? { Authorization: headers.Authorization } : {};
    } catch (error) {
      return {};
    }
  }

  const fetcher = GraphiQL.createFetcher({
    url: url.toString(),
    subscriptionUrl: subscriptionUrl.toString(),
    wsConnectionParams: authorization,
  });

  function Page() {
    const explorer = React.useMemo(() => GraphiQLPluginExplorer.explorerPlugin(), []);
    return React.createElement(GraphiQL, {
      fetcher: fetcher,
      defaultEditorToolsVisibility: true,
      plugins: [explorer],
      defaultQuery: settings.query,
      variables: settings.variables,
      headers: settings.headers,
      onEditHeaders: function (text) {
        headersText = text;
      },
      isHeadersEditorEnabled: true,
      shouldPersistHeaders: false,
      inputValueDeprecation: true,
    });
  }

  ReactDOM.createRoot(document.getElementById("graphiql")).render(React.createElement(Page));
})();
