package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/mail"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
)

// Signup is a message's body: a user who has just signed up.
//
//	{"user_id": "u-1", "email": "ada@example.com", "name": "Ada"}
type Signup struct {
	UserID string `json:"user_id"`
	Email  string `json:"email"`
	Name   string `json:"name"`
}

// Email is what the Mailer sends.
type Email struct {
	To, Subject, Text string
}

// Mailer sends email: your provider's client in main.go, a fake in the
// tests. key goes to the provider as its idempotency key (an
// Idempotency-Key header): it is the same on every attempt at one user's
// email, so the provider sends one email even when the handler runs again
// after the send (a crash, a timeout, a 504 after the email went out).
type Mailer interface {
	Send(ctx context.Context, key string, e Email) error
}

// BusyError is what a Mailer returns when the provider refused the email
// and asks to wait (an HTTP 429 with Retry-After): nothing was sent.
type BusyError struct {
	Wait time.Duration
}

func (e *BusyError) Error() string {
	return fmt.Sprintf("mail provider busy: retry in %s", e.Wait)
}

// options are the decorator options the function is deployed with: main
// adds where records, dead letters and visibility changes go, and the
// tests run the handler with these same options.
func options() []lambdaidem.Option {
	return []lambdaidem.Option{
		// The idempotency key is the user, not the SQS message: a signup
		// sent twice (a producer's retry) sends one email.
		lambdaidem.WithKeyJSONField("user_id"),
		// The fifth failed attempt dead-letters the message (max_attempts).
		lambdaidem.WithMaxAttempts(5),
	}
}

// handle sends each user one welcome email. lambdaidem runs it once per
// user_id; a body that is not JSON or has no user_id never reaches it
// (dead-lettered as malformed_body or missing_key).
func handle(mailer Mailer) lambdaidem.MessageHandler {
	return func(ctx context.Context, msg events.SQSMessage) error {
		var s Signup
		if err := json.Unmarshal([]byte(msg.Body), &s); err != nil {
			// A user_id beside a field of the wrong type ("email": 5).
			return lambdaidem.Poison(fmt.Errorf("not a signup: %w", err))
		}
		to, err := mail.ParseAddress(s.Email)
		if err != nil {
			// It can never succeed: to the dead-letter queue now, with
			// its reason (poison), instead of after five attempts.
			return lambdaidem.Poison(fmt.Errorf("user %s: email %q: %w", s.UserID, s.Email, err))
		}
		// The same key on every attempt at this user's email, a new one
		// only if an operator makes lambdaidem forget the user.
		key, ok := lambdaidem.EffectKey(ctx)
		if !ok {
			return errors.New("no effect key: the handler runs under lambdaidem.SQS")
		}
		err = mailer.Send(ctx, key, Email{
			To:      to.Address,
			Subject: "Welcome",
			Text:    fmt.Sprintf("Hello %s, welcome aboard.", s.Name),
		})
		var busy *BusyError
		if errors.As(err, &busy) {
			// Nothing was sent (NotApplied), and the message comes back
			// when the provider said, not after the backoff.
			return lambdaidem.NotApplied(lambdaidem.RetryAfter(busy.Wait, err))
		}
		// nil: done, and never sent again. Any other error (a 5xx, a
		// timeout) is retried after the backoff (main.go), under the same
		// key.
		return err
	}
}
