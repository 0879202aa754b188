// The same operations written for Relay: relay-compiler wants each operation
// named <Module><Name>Query|Mutation and each fragment <Module>_<prop>, the
// module being this file's name (App). `npm run relay` compiles them into
// ./__generated__ (git-ignored) and persists their texts into
// ../../manifests/relay-persisted_queries*.json. relay-runtime itself is not
// installed here: only the compiler reads this file.
import { graphql } from "relay-runtime";

export const paymentFragment = graphql`
  fragment App_payment on Payment {
    id
    paymentId
    status
    amountCents
  }
`;

export const loanPaymentsQuery = graphql`
  query AppLoanPaymentsQuery($userId: ID!, $loanId: ID!) {
    loan(userId: $userId, loanId: $loanId) {
      payments(first: 3) {
        edges {
          node {
            ...App_payment
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

export const onePaymentQuery = graphql`
  query AppOnePaymentQuery($userId: ID!, $loanId: ID!, $paymentId: ID!) {
    payment(userId: $userId, loanId: $loanId, paymentId: $paymentId) {
      id
      paymentId
      status
      amountCents
      version
    }
  }
`;

// A customer may create only ACH payments of the MANUAL process.
export const createPaymentMutation = graphql`
  mutation AppCreatePaymentMutation(
    $userId: ID!
    $loanId: ID!
    $amountCents: Int!
    $idempotencyKey: String!
  ) {
    createPayment(
      input: {
        userId: $userId
        loanId: $loanId
        amountCents: $amountCents
        method: ACH
        process: MANUAL
        idempotencyKey: $idempotencyKey
      }
    ) {
      __typename
      ... on PaymentPayload {
        replayed
        payment {
          id
          paymentId
          status
        }
      }
      ... on UserError {
        code
        message
      }
    }
  }
`;
