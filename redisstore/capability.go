package redisstore

import (
	"errors"
	"reflect"
	"strings"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

// Capabilities declares what the store can do, so SQS, Wrap and httpidem
// refuse at construction what it cannot: it commits Command and *Command
// completion writes in the completion's script, keeps results up to
// WithMaxResultBytes and reserves '{' and '}' in namespaces (the
// namespace is the cluster hash tag). AddCompletionWrite checks each
// command as the handler adds it (ErrInvalidCommand, ErrCrossSlot).
func (s *Store) Capabilities() idemstore.Capabilities {
	return idemstore.Capabilities{
		Store:            "Redis",
		CompletionWrites: []reflect.Type{reflect.TypeFor[Command](), reflect.TypeFor[*Command]()},
		MaxResultBytes:   s.maxRes,
		CheckNamespace:   checkNamespace,
		CheckWrite:       s.checkWrite,
	}
}

// checkNamespace refuses a namespace that would break the hash tag.
func checkNamespace(ns string) error {
	if strings.ContainsAny(ns, "{}") {
		return errors.New("it contains '{' or '}', which delimit the cluster hash tag")
	}
	return nil
}

var _ idemstore.Capable = (*Store)(nil)
