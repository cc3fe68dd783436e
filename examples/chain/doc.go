// Command chain is two SQS consumers in a row, the shape of most flows
// whose effect leaves the function: the orders stage sends one notification
// per order to a second queue, and the notify stage sends each order's
// email through an HTTP email API. One binary serves both; STAGE says which
// (template.yaml deploys it twice).
//
// Neither effect can join the record's completion, so each is made safe
// the way docs/effects.md gives for its kind:
//
//   - the notification is a message to another queue: the orders stage
//     gives it the order's effect key (lambdaidem.EffectKey) as its
//     idempotency key, the same on every attempt, and the notify stage is
//     keyed by it (lambdaidem.WithKeyAttribute): a crash after the send
//     sends it again, and the notify stage skips the copy as the duplicate
//     it is;
//   - the email goes to an API. One that takes an idempotency key
//     (EMAIL_API_KEYED=true) gets the notify stage's effect key as
//     Idempotency-Key and sends one email per key however often it is
//     asked; with one that takes none, the notify stage runs at most once
//     (lambdaidem.WithAtMostOnce): an email whose outcome is unknown (a
//     504, a crash after the call) is dead-lettered as outcome_unknown for
//     a person, never sent twice, and an answer that says nothing was sent
//     (429, 503: lambdaidem.NotApplied) is retried.
//
// It reads STAGE, IDEMPOTENCY_TABLE, DLQ_URL, NOTIFICATIONS_QUEUE_URL (the
// orders stage), EMAIL_API_URL and EMAIL_API_KEYED (the notify stage) and
// MAX_ATTEMPTS. An order is {"order_id": "o-1", "email": "a@example.com"};
// for tests and the chaos run, "crash": "after_send" exits the orders stage
// after the send on attempt 1 (or the attempts in "crash_attempts"), and
// "notify_crash": "after_email" exits the notify stage after the email.
// `make chaos CHAOS_FLAGS='-mode chain-amo'` (chain-keyed, chain-plain)
// runs it under crashes and email API faults.
package main
