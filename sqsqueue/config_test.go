package sqsqueue

import (
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

func TestCheckQueueURL(t *testing.T) {
	t.Parallel()
	for _, u := range []string{
		"https://sqs.us-east-1.amazonaws.com/111122223333/orders",
		"https://sqs.us-east-1.amazonaws.com/111122223333/orders.fifo",
		"http://127.0.0.1:4566/000000000000/dlq",
		"https://sqs.sim.local/000000000000/q_1",
	} {
		if err := CheckQueueURL(u); err != nil {
			t.Errorf("CheckQueueURL(%q) = %v, want nil", u, err)
		}
	}
	for _, u := range []string{
		"",
		"orders-dlq",
		"arn:aws:sqs:us-east-1:111122223333:orders",
		"sqs.us-east-1.amazonaws.com/111122223333/orders",
		"ftp://sqs.us-east-1.amazonaws.com/111122223333/orders",
		"https:///111122223333/orders",
		"https://sqs.us-east-1.amazonaws.com/orders",
		"https://sqs.us-east-1.amazonaws.com/111122223333/",
		"https://sqs.us-east-1.amazonaws.com/111122223333/bad.name",
		"https://sqs.us-east-1.amazonaws.com/111122223333/orders?x=1",
		"https://user@sqs.us-east-1.amazonaws.com/111122223333/orders",
	} {
		err := CheckQueueURL(u)
		if !errors.Is(err, ErrInvalidQueueURL) || !errors.Is(err, idemstore.ErrInvalidOption) {
			t.Errorf("CheckQueueURL(%q) = %v, want ErrInvalidQueueURL and lambdaidem.ErrInvalidOption", u, err)
		}
	}
}

// The constructors refuse, when called, settings that would fail every
// send or visibility change.
func TestConstructorsRefuseWhatCouldNeverWork(t *testing.T) {
	t.Parallel()
	client := sqs.New(sqs.Options{Region: "us-east-1"})
	const url = "https://sqs.us-east-1.amazonaws.com/111122223333/orders"
	const arn = "arn:aws:sqs:us-east-1:111122223333:orders"
	for _, tc := range []struct {
		name   string
		build  func()
		want   error
		option string
	}{
		{"empty DLQ URL", func() { NewSink(client, "") }, ErrInvalidQueueURL, "queue URL"},
		{"DLQ ARN", func() { NewSink(client, arn) }, ErrInvalidQueueURL, "queue URL"},
		{"nil sink client", func() { NewSink(nil, url) }, idemstore.ErrInvalidOption, "client"},
		{"nil pointer client", func() { NewSink((*sqs.Client)(nil), url) }, idemstore.ErrInvalidOption, "client"},
		{"nil visibility client", func() { NewVisibilityChanger(nil) }, idemstore.ErrInvalidOption, "client"},
		{"endpoint", func() { NewVisibilityChanger(client, WithEndpoint("localhost:4566")) }, idemstore.ErrInvalidOption, "WithEndpoint"},
		{"URL keyed by a name", func() { NewVisibilityChanger(client, WithQueueURLs(map[string]string{"orders": url})) }, ErrInvalidARN, "WithQueueURLs"},
		{"ARN mapped to an empty URL", func() { NewVisibilityChanger(client, WithQueueURLs(map[string]string{arn: ""})) }, ErrInvalidQueueURL, "WithQueueURLs"},
		{"ARN mapped to another queue", func() {
			NewVisibilityChanger(client, WithQueueURLs(map[string]string{arn: "https://sqs.us-east-1.amazonaws.com/111122223333/other"}))
		}, ErrInvalidQueueURL, "WithQueueURLs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := lambdaidem.Check(tc.build)
			var ce *idemstore.ConfigError
			if !errors.As(err, &ce) || !errors.Is(err, tc.want) || ce.Option != tc.option {
				t.Fatalf("refusal %v, want a ConfigError for %q matching %v", err, tc.option, tc.want)
			}
		})
	}
	for _, build := range []func(){
		func() { NewSink(client, url) },
		func() {
			NewVisibilityChanger(client, WithEndpoint("http://127.0.0.1:4566"), WithQueueURLs(map[string]string{arn: url}))
		},
	} {
		if err := lambdaidem.Check(build); err != nil {
			t.Errorf("refused: %v", err)
		}
	}
}
