package sqsqueue

import (
	"fmt"
	"net/url"
	"reflect"
	"strings"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

// CheckQueueURL returns nil when u is an SQS queue URL:
// https://HOST/ACCOUNT/NAME (http for an emulator on the local machine),
// with a queue name SQS accepts (ValidQueueName) and nothing after it.
// Otherwise it returns an error wrapping ErrInvalidQueueURL and
// idemstore.ErrInvalidOption. NewSink, NewVisibilityChanger's
// WithQueueURLs and Redrive check their URLs with it; a tool that reads a
// URL from its flags or the environment may check it first.
func CheckQueueURL(u string) error {
	bad := func(why string) error {
		return fmt.Errorf("%w: %q %s", ErrInvalidQueueURL, u, why)
	}
	if u == "" {
		return bad("is empty")
	}
	p, err := url.Parse(u)
	switch {
	case err != nil:
		return bad("does not parse: " + err.Error())
	case p.Scheme != "https" && p.Scheme != "http":
		return bad("is not an https URL (https://sqs.REGION.amazonaws.com/ACCOUNT/NAME)")
	case p.Host == "":
		return bad("has no host")
	case p.RawQuery != "" || p.Fragment != "" || p.User != nil:
		return bad("has a query, a fragment or user information")
	}
	rest, name, _ := strings.Cut(strings.TrimPrefix(p.Path, "/"), "/")
	for strings.Contains(name, "/") {
		rest, name, _ = strings.Cut(name, "/")
	}
	switch {
	case rest == "" || name == "":
		return bad("is not HOST/ACCOUNT/NAME")
	case !ValidQueueName(name):
		return bad("does not end in a queue name (1 to 80 letters, digits, '-' and '_', optionally '.fifo')")
	}
	return nil
}

// refuse panics, as the constructors of this package do for settings
// that could never work, with a *idemstore.ConfigError.
func refuse(handler, option string, err error) {
	panic(&idemstore.ConfigError{Handler: handler, Option: option, Err: err})
}

// nilClient reports whether a client is nil or a nil pointer.
func nilClient(c any) bool {
	if c == nil {
		return true
	}
	v := reflect.ValueOf(c)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

// checkEndpoint refuses an endpoint that is not an http(s) base URL.
func checkEndpoint(e string) error {
	p, err := url.Parse(e)
	if err != nil || (p.Scheme != "https" && p.Scheme != "http") || p.Host == "" {
		return fmt.Errorf("%w: the endpoint %q is not an http(s) URL", idemstore.ErrInvalidOption, e)
	}
	return nil
}
