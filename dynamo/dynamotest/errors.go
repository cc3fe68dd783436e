package dynamotest

import (
	"errors"
	"fmt"

	"github.com/aws/smithy-go"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

// Named errors of this package.
var (
	// ErrUnsupported: the request uses a part of DynamoDB's API that this
	// package does not interpret (a construct of an expression, a
	// ReturnValues setting, a field). The error names it. It matches
	// idemstore.ErrUnsupportedWrite too, so a completion that carries
	// such a write is refused like any write its store cannot commit.
	ErrUnsupported = errors.New("dynamotest: not interpreted")
	// ErrNoTable: a request names a table that was not created with New.
	ErrNoTable = errors.New("dynamotest: no such table")
)

// unsupportedError names what is not interpreted.
type unsupportedError struct {
	what, where string
}

func (e *unsupportedError) Error() string {
	if e.where == "" {
		return fmt.Sprintf("%v: %s", ErrUnsupported, e.what)
	}
	return fmt.Sprintf("%v: %s (in %q)", ErrUnsupported, e.what, e.where)
}

func (e *unsupportedError) Is(target error) bool {
	return target == ErrUnsupported || target == idemstore.ErrUnsupportedWrite
}

func unsupported(what, where string) error { return &unsupportedError{what: what, where: where} }

// validation is DynamoDB's ValidationException, with its message: a
// request DynamoDB itself would refuse.
func validation(msg string) error {
	return &smithy.GenericAPIError{Code: "ValidationException", Message: msg, Fault: smithy.FaultClient}
}

// IsValidation reports whether err is a ValidationException, as DynamoDB
// answers a request it refuses for its form.
func IsValidation(err error) bool {
	var ae smithy.APIError
	return errors.As(err, &ae) && ae.ErrorCode() == "ValidationException"
}
