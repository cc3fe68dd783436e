package lambdaidem_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore/memstore"
)

type invoiceRequest struct {
	Order string `json:"order"`
	Cents int    `json:"cents"`
}

type invoice struct {
	Number int `json:"number"`
	Cents  int `json:"cents"`
}

// Wrap makes a function of one input idempotent: a repeat with the same
// key and input gets the stored result, and the same key with another
// input is a conflict.
func ExampleWrap() {
	issued := 0
	issue := func(ctx context.Context, req invoiceRequest) (invoice, error) {
		issued++
		return invoice{Number: 1000 + issued, Cents: req.Cents}, nil
	}
	issueOnce := lambdaidem.Wrap(memstore.New(), issue,
		lambdaidem.WithNamespace("invoices"),
		lambdaidem.WithKeyJSONField("order"))

	ctx := context.Background()
	first, err := issueOnce(ctx, invoiceRequest{Order: "o-1", Cents: 4200})
	fmt.Println(first, err)
	again, err := issueOnce(ctx, invoiceRequest{Order: "o-1", Cents: 4200})
	fmt.Println(again, err)
	_, err = issueOnce(ctx, invoiceRequest{Order: "o-1", Cents: 99})
	fmt.Println(errors.Is(err, lambdaidem.ErrKeyConflict))
	fmt.Println("issued:", issued)
	// Output:
	// {1001 4200} <nil>
	// {1001 4200} <nil>
	// true
	// issued: 1
}

// With WithWaitForCompletion, a repeat that finds the first call still
// running (a client that gave up waiting and retried) waits for it and
// gets its result, instead of an InProgressError.
func ExampleWithWaitForCompletion() {
	started, release := make(chan struct{}), make(chan struct{})
	issue := func(ctx context.Context, req invoiceRequest) (invoice, error) {
		close(started) // runs once: the repeat waits for this run
		<-release      // the invoicing service is slow today
		return invoice{Number: 1001, Cents: req.Cents}, nil
	}
	issueOnce := lambdaidem.Wrap(memstore.New(), issue,
		lambdaidem.WithNamespace("invoices"),
		lambdaidem.WithKeyJSONField("order"),
		lambdaidem.WithWaitForCompletion(10*time.Second))

	ctx := context.Background()
	first := make(chan invoice)
	go func() {
		inv, _ := issueOnce(ctx, invoiceRequest{Order: "o-1", Cents: 4200})
		first <- inv
	}()
	<-started
	repeat := make(chan invoice)
	go func() {
		inv, err := issueOnce(ctx, invoiceRequest{Order: "o-1", Cents: 4200})
		if err != nil {
			fmt.Println(err)
		}
		repeat <- inv
	}()
	close(release)
	fmt.Println("first: ", <-first)
	fmt.Println("repeat:", <-repeat)
	// Output:
	// first:  {1001 4200}
	// repeat: {1001 4200}
}
