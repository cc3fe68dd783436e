package sqsqueue

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

// Named errors. Every error this package returns for a failed SQS call wraps
// one of them (when the failure is one of these kinds) and the SDK's own
// error, so errors.Is finds the kind and errors.As finds the cause.
var (
	// ErrInvalidARN: an eventSourceARN that is not an SQS queue ARN
	// (arn:PARTITION:sqs:REGION:ACCOUNT:NAME), or one of an unknown partition
	// with no endpoint or URL override configured.
	ErrInvalidARN = errors.New("sqsqueue: invalid SQS queue ARN")
	// ErrInvalidQueueURL: a setting that should be a queue URL is not one
	// (empty, not https://HOST/ACCOUNT/NAME); see CheckQueueURL. The
	// constructors refuse it when they are built.
	ErrInvalidQueueURL error = invalidSetting("sqsqueue: invalid SQS queue URL")
	// ErrTooLarge: the dead-letter copy cannot fit in one SQS message, even
	// with the error text dropped. Retrying will not help; the caller must
	// log and count it.
	ErrTooLarge = errors.New("sqsqueue: message too large for SQS")
	// ErrQueueNotFound: the queue does not exist (deleted, wrong URL, wrong
	// account or Region).
	ErrQueueNotFound = errors.New("sqsqueue: queue does not exist")
	// ErrAccessDenied: the caller may not use the queue or its KMS key
	// (IAM, queue policy, KMS key policy, or invalid credentials).
	ErrAccessDenied = errors.New("sqsqueue: access denied")
	// ErrUnreachable: the SQS endpoint could not be reached (connection
	// refused, DNS, network timeout). Nothing was sent.
	ErrUnreachable = errors.New("sqsqueue: SQS endpoint unreachable")
	// ErrVisibilityLimit: SQS refused a visibility timeout because the
	// message would stay invisible more than 12 hours in total. The message
	// becomes visible when its current timeout ends.
	ErrVisibilityLimit = errors.New("sqsqueue: visibility timeout beyond SQS's 12-hour limit")
	// ErrNotInFlight: the receipt handle is missing, invalid or expired, or
	// the message is no longer in flight (deleted, or received again by
	// someone else), so its visibility cannot be changed or it cannot be
	// deleted with that handle.
	ErrNotInFlight = errors.New("sqsqueue: message is not in flight")
	// ErrNotDeadLetter: a message has no valid lambdaidem attribute, so it
	// was not written by this package's Sink (or the attribute is corrupt).
	ErrNotDeadLetter = errors.New("sqsqueue: not a lambdaidem dead-letter message")
)

// invalidSetting is a named error of a setting a constructor refuses; it
// matches idemstore.ErrInvalidOption too.
type invalidSetting string

func (e invalidSetting) Error() string { return string(e) }

// Is reports whether target is idemstore.ErrInvalidOption.
func (e invalidSetting) Is(target error) bool { return target == idemstore.ErrInvalidOption }

// apiError is the part of the SDK's API error we read. It is satisfied by
// smithy-go's APIError without importing it.
type apiError interface {
	error
	ErrorCode() string
	ErrorMessage() string
}

// classify returns the named error matching err, or nil.
func classify(err error) error {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return nil
	}
	var ae apiError
	if errors.As(err, &ae) {
		code, msg := ae.ErrorCode(), ae.ErrorMessage()
		switch code {
		case "QueueDoesNotExist", "AWS.SimpleQueueService.NonExistentQueue":
			return ErrQueueNotFound
		case "AccessDenied", "AccessDeniedException", "InvalidSecurity",
			"InvalidClientTokenId", "UnrecognizedClientException", "SignatureDoesNotMatch",
			"KmsAccessDenied", "KMS.AccessDeniedException",
			"KmsDisabled", "KMS.DisabledException",
			"KmsNotFound", "KMS.NotFoundException",
			"KmsInvalidState", "KMS.KMSInvalidStateException",
			"KmsInvalidKeyUsage", "KMS.InvalidKeyUsageException",
			"KmsOptInRequired", "KMS.OptInRequired":
			return ErrAccessDenied
		case "ReceiptHandleIsInvalid", "MessageNotInflight", "AWS.SimpleQueueService.MessageNotInflight":
			return ErrNotInFlight
		case "InvalidParameterValue":
			lower := strings.ToLower(msg)
			switch {
			case strings.Contains(lower, "must be shorter than"):
				return ErrTooLarge
			case strings.Contains(lower, "visibilitytimeout") && strings.Contains(lower, "limit"):
				return ErrVisibilityLimit
			case strings.Contains(lower, "receipt handle"):
				return ErrNotInFlight
			}
		}
		return nil
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return ErrUnreachable
	}
	return nil
}

// wrap annotates err with what was being done and, when it is one of the
// named kinds, with that kind.
func wrap(err error, format string, args ...any) error {
	what := fmt.Sprintf(format, args...)
	if kind := classify(err); kind != nil {
		return fmt.Errorf("sqsqueue: %s: %w: %w", what, kind, err)
	}
	return fmt.Errorf("sqsqueue: %s: %w", what, err)
}
