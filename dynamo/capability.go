package dynamo

import (
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

// Capabilities declares what the store can do, so SQS, Wrap and httpidem
// refuse at construction what it cannot: it commits
// types.TransactWriteItem and *types.TransactWriteItem completion writes
// in the completion's transaction, keeps results up to MaxResultBytes,
// reserves '#' in namespaces (it separates the namespace from the key in
// the partition key), and checks each completion write as the handler
// adds it against the limits of the transaction it will join.
func (s *Store) Capabilities() idemstore.Capabilities {
	return idemstore.Capabilities{
		Store:            "DynamoDB",
		CompletionWrites: []reflect.Type{reflect.TypeFor[types.TransactWriteItem](), reflect.TypeFor[*types.TransactWriteItem]()},
		MaxResultBytes:   MaxResultBytes,
		CheckNamespace:   checkNamespace,
		CheckWrite:       s.checkWrite,
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

var _ idemstore.Capable = (*Store)(nil)

// Limits of a DynamoDB table name.
const (
	minTableName = 3
	maxTableName = 255
)

// CheckTableName returns nil when DynamoDB accepts table as a table name
// or table ARN, or an error wrapping ErrInvalidTableName and
// idemstore.ErrInvalidOption: a name is 3 to 255 letters, digits, '_',
// '-' and '.'; an ARN is arn:PARTITION:dynamodb:REGION:ACCOUNT:table/NAME
// with such a name. New checks its table with it; a tool that reads the
// name from its flags or the environment may check it first.
func CheckTableName(table string) error {
	bad := func(why string) error {
		return fmt.Errorf("%w: %q %s", ErrInvalidTableName, table, why)
	}
	name := table
	if strings.HasPrefix(table, "arn:") {
		parts := strings.SplitN(table, ":", 6)
		var ok bool
		if len(parts) == 6 && parts[2] == "dynamodb" && parts[3] != "" && parts[4] != "" {
			name, ok = strings.CutPrefix(parts[5], "table/")
		}
		if !ok {
			return bad("is not a table ARN (arn:PARTITION:dynamodb:REGION:ACCOUNT:table/NAME)")
		}
	}
	switch {
	case table == "":
		return bad("is empty")
	case len(name) < minTableName || len(name) > maxTableName:
		return bad(fmt.Sprintf("is not %d to %d characters long", minTableName, maxTableName))
	case strings.ContainsFunc(name, func(r rune) bool {
		return !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '_' || r == '-' || r == '.')
	}):
		return bad("holds a character other than letters, digits, '_', '-' and '.'")
	}
	return nil
}
