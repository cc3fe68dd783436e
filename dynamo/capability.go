package dynamo

import (
	"errors"
	"reflect"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
)

// Capabilities declares what the store can do, so SQS, Wrap and httpidem
// refuse at construction what it cannot: it commits
// types.TransactWriteItem and *types.TransactWriteItem completion writes
// in the completion's transaction, keeps results up to MaxResultBytes,
// and reserves '#' in namespaces (it separates the namespace from the key
// in the partition key).
func (s *Store) Capabilities() lambdaidem.Capabilities {
	return lambdaidem.Capabilities{
		Store:            "DynamoDB",
		CompletionWrites: []reflect.Type{reflect.TypeFor[types.TransactWriteItem](), reflect.TypeFor[*types.TransactWriteItem]()},
		MaxResultBytes:   MaxResultBytes,
		CheckNamespace:   checkNamespace,
	}
}

// checkNamespace refuses a namespace the partition key cannot keep apart
// from the key.
func checkNamespace(ns string) error {
	if strings.Contains(ns, "#") {
		return errors.New("it contains '#', which separates the namespace from the key")
	}
	return nil
}

var _ lambdaidem.Capable = (*Store)(nil)
