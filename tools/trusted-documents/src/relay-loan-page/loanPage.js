// The loan page as a Relay app writes it (relay-compiler reads these tags; relay.loan-page.config.json):
// each payment's history in a fragment spread with @defer, the payments' edges with @stream. The
// artifacts it makes (__generated__/, git-ignored) are what loan-page.mjs's relay client runs.
import { graphql } from "relay-runtime";

export const query = graphql`
  query loanPageQuery($loanId: ID!) {
    loan(loanId: $loanId) {
      id
      loanId
      payments(first: 20) {
        edges @stream(initialCount: 5, label: "edges") {
          cursor
          node {
            paymentId
            status
            amountCents
            ...loanPage_history @defer(label: "history")
          }
        }
        pageInfo {
          hasNextPage
          endCursor
        }
      }
    }
  }
`;

export const history = graphql`
  fragment loanPage_history on Payment {
    history(first: 5) {
      edges {
        node {
          version
          toStatus
        }
      }
    }
  }
`;
