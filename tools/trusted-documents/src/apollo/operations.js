// The operations an Apollo Client front end sends, as gql-tagged documents.
// `npm run apollo-manifest` extracts them into ../../manifests/apollo-persisted-query-manifest.json,
// and ../../apq.mjs imports LOAN_PAYMENTS from here to drive the persisted-query link.
import { gql } from "@apollo/client";

export const LOAN_PAYMENTS = gql`
  query LoanPayments($userId: ID!, $loanId: ID!) {
    loan(userId: $userId, loanId: $loanId) {
      payments(first: 3) {
        edges {
          node {
            id
            paymentId
            status
            amountCents
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

export const ONE_PAYMENT = gql`
  query OnePayment($userId: ID!, $loanId: ID!, $paymentId: ID!) {
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
export const CREATE_PAYMENT = gql`
  mutation CreatePayment(
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
