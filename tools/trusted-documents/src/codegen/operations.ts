// The same operations written for GraphQL Code Generator's client preset:
// `graphql()` comes from ./gql, which `npm run codegen` generates (git-ignored)
// together with ./gql/persisted-documents.json, copied to
// ../../manifests/codegen-persisted-documents.json.
import { graphql } from "./gql";

export const LoanPaymentsDocument = graphql(`
  query LoanPayments($userId: ID!, $loanId: ID!) {
    loan(userId: $userId, loanId: $loanId) {
      payments(first: 3) {
        edges {
          node {
            ...PaymentRow
          }
        }
        pageInfo {
          hasNextPage
          endCursor
        }
      }
    }
  }
`);

export const PaymentRowFragment = graphql(`
  fragment PaymentRow on Payment {
    id
    paymentId
    status
    amountCents
  }
`);

export const OnePaymentDocument = graphql(`
  query OnePayment($userId: ID!, $loanId: ID!, $paymentId: ID!) {
    payment(userId: $userId, loanId: $loanId, paymentId: $paymentId) {
      id
      paymentId
      status
      amountCents
      version
    }
  }
`);

// A customer may create only ACH payments of the MANUAL process.
export const CreatePaymentDocument = graphql(`
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
`);
