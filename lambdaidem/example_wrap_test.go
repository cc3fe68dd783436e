package lambdaidem_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/memstore"
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
