package redisstore

import (
	"errors"
	"strings"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
)

// Capabilities declares what the store can do, so SQS, Wrap and httpidem
// refuse at construction what it cannot: it keeps results up to
// Options.MaxResultBytes and reserves '{' and '}' in namespaces (the
// namespace is the cluster hash tag).
func (s *Store) Capabilities() lambdaidem.Capabilities {
	return lambdaidem.Capabilities{
		Store:          "Redis",
		MaxResultBytes: s.maxRes,
		CheckNamespace: checkNamespace,
	}
}

// checkNamespace refuses a namespace that would break the hash tag.
func checkNamespace(ns string) error {
	if strings.ContainsAny(ns, "{}") {
		return errors.New("it contains '{' or '}', which delimit the cluster hash tag")
	}
	return nil
}

var _ lambdaidem.Capable = (*Store)(nil)
