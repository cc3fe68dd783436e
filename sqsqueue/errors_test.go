package sqsqueue

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

// codeError stands in for the SDK's API error: only the code and message
// matter to classify.
type codeError struct{ code, msg string }

func (e codeError) Error() string        { return e.code + ": " + e.msg }
func (e codeError) ErrorCode() string    { return e.code }
func (e codeError) ErrorMessage() string { return e.msg }

func TestClassify(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err  error
		want error
	}{
		{codeError{"AWS.SimpleQueueService.NonExistentQueue", ""}, ErrQueueNotFound},
		{codeError{"QueueDoesNotExist", ""}, ErrQueueNotFound},
		{codeError{"AccessDenied", "not authorized to perform sqs:SendMessage"}, ErrAccessDenied},
		{codeError{"KMS.AccessDeniedException", ""}, ErrAccessDenied},
		{codeError{"KmsDisabled", ""}, ErrAccessDenied},
		{codeError{"InvalidParameterValue", "One or more parameters are invalid. Reason: Message must be shorter than 262144 bytes."}, ErrTooLarge},
		{codeError{"InvalidParameterValue", "Value 43200 for parameter VisibilityTimeout is invalid. Reason: Total VisibilityTimeout for the message is beyond the limit [43200 seconds]"}, ErrVisibilityLimit},
		{codeError{"InvalidParameterValue", "Value x for parameter ReceiptHandle is invalid. Reason: The receipt handle has expired."}, ErrNotInFlight},
		{codeError{"MessageNotInflight", ""}, ErrNotInFlight},
		{codeError{"InvalidParameterValue", "something else"}, nil},
		{codeError{"ThrottlingException", ""}, nil},
		{fmt.Errorf("op: %w", context.Canceled), nil},
	}
	for _, tt := range tests {
		if got := classify(fmt.Errorf("wrapped: %w", tt.err)); got != tt.want {
			t.Errorf("classify(%v) = %v, want %v", tt.err, got, tt.want)
		}
		w := wrap(tt.err, "doing")
		if !errors.Is(w, tt.err) {
			t.Errorf("wrap lost the cause %v", tt.err)
		}
		if tt.want != nil && !errors.Is(w, tt.want) {
			t.Errorf("wrap(%v) does not match %v", tt.err, tt.want)
		}
	}
}
