package dynamo_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/lambdaidem/go-lambdaidem/dynamo"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

func TestCheckTableName(t *testing.T) {
	t.Parallel()
	for _, name := range []string{
		"idempotency", "abc", "My_Table-1.v2", strings.Repeat("t", 255),
		"arn:aws:dynamodb:us-east-1:111122223333:table/idempotency",
	} {
		if err := dynamo.CheckTableName(name); err != nil {
			t.Errorf("CheckTableName(%q) = %v, want nil", name, err)
		}
	}
	for _, name := range []string{
		"", "ab", strings.Repeat("t", 256), "has space", "slash/table", "ünïcode",
		"arn:aws:dynamodb:us-east-1:111122223333:idempotency",
		"arn:aws:sqs:us-east-1:111122223333:table/idempotency",
		"arn:aws:dynamodb:us-east-1:111122223333:table/x",
	} {
		err := dynamo.CheckTableName(name)
		if !errors.Is(err, dynamo.ErrInvalidTableName) || !errors.Is(err, idemstore.ErrInvalidOption) {
			t.Errorf("CheckTableName(%q) = %v, want ErrInvalidTableName and lambdaidem.ErrInvalidOption", name, err)
		}
	}
}

// New refuses, when called, a table name every request would fail on.
func TestNewRefusesWhatCouldNeverWork(t *testing.T) {
	t.Parallel()
	client := dynamodb.New(dynamodb.Options{Region: "us-east-1"})
	for _, tc := range []struct {
		build  func()
		want   error
		option string
	}{
		{func() { dynamo.New(client, "") }, dynamo.ErrInvalidTableName, "table name"},
		{func() { dynamo.NewAdmin(client, "a b") }, dynamo.ErrInvalidTableName, "table name"},
		{func() { dynamo.New(nil, "idempotency") }, idemstore.ErrInvalidOption, "client"},
		{func() { dynamo.New((*dynamodb.Client)(nil), "idempotency") }, idemstore.ErrInvalidOption, "client"},
	} {
		err := lambdaidem.Check(tc.build)
		var ce *idemstore.ConfigError
		if !errors.As(err, &ce) || !errors.Is(err, tc.want) || ce.Option != tc.option || ce.Handler != "dynamo.New" {
			t.Errorf("refusal %v, want dynamo.New's ConfigError for %q matching %v", err, tc.option, tc.want)
		}
	}
}
