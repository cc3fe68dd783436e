package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
)

// Spec is the parsed form of localstack/resources.json.
type Spec struct {
	Comment                string  `json:"comment,omitempty"`
	FunctionTimeoutSeconds int     `json:"functionTimeoutSeconds"`
	Tables                 []Table `json:"tables"`
	Queues                 []Queue `json:"queues"`
}

// Key is one attribute of a key schema.
type Key struct {
	Name string `json:"name"`
	Type string `json:"type"` // S, N or B, as DynamoDB spells them
}

// Table describes one DynamoDB table (always on-demand billing).
type Table struct {
	LogicalID              string  `json:"logicalId"`
	Name                   string  `json:"name"`
	HashKey                Key     `json:"hashKey"`
	RangeKey               *Key    `json:"rangeKey,omitempty"`
	TTLAttribute           string  `json:"ttlAttribute,omitempty"`
	GlobalSecondaryIndexes []Index `json:"globalSecondaryIndexes,omitempty"`
	Template               *bool   `json:"template,omitempty"`
}

// Index describes a global secondary index.
type Index struct {
	Name       string `json:"name"`
	HashKey    Key    `json:"hashKey"`
	RangeKey   *Key   `json:"rangeKey,omitempty"`
	Projection string `json:"projection"` // KEYS_ONLY or ALL
}

// Queue describes one SQS queue.
type Queue struct {
	LogicalID                string   `json:"logicalId"`
	Name                     string   `json:"name"`
	FIFO                     bool     `json:"fifo,omitempty"`
	VisibilityTimeoutSeconds int      `json:"visibilityTimeoutSeconds,omitempty"`
	MessageRetentionSeconds  int      `json:"messageRetentionSeconds,omitempty"`
	Redrive                  *Redrive `json:"redrive,omitempty"`
	Template                 *bool    `json:"template,omitempty"`
}

// Redrive is a queue's redrive policy; DeadLetterQueue is a LogicalID.
type Redrive struct {
	DeadLetterQueue string `json:"deadLetterQueue"`
	MaxReceiveCount int    `json:"maxReceiveCount"`
}

// libraryDefaultMaxAttempts mirrors the library's documented default maximum
// attempts. SQS's maxReceiveCount must stay well above it: in-progress
// rejections, throttles and store outages raise SQS's receive count but not
// the library's attempt count, and SQS's redrive moves a message without a
// reason, so it is only a backstop.
const libraryDefaultMaxAttempts = 5

// errInvalidSpec is wrapped by every validation failure.
var errInvalidSpec = errors.New("invalid resource description")

// LoadSpec reads and validates a resource description.
func LoadSpec(path string) (Spec, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Spec{}, err
	}
	var s Spec
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields() // a misspelt field must not be silently ignored
	if err := dec.Decode(&s); err != nil {
		return Spec{}, fmt.Errorf("%s: %w", path, err)
	}
	if err := s.Validate(); err != nil {
		return Spec{}, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// Validate checks the rules the local stack and template.yaml rely on.
func (s Spec) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{errInvalidSpec}, args...)...))
	}
	if s.FunctionTimeoutSeconds <= 0 {
		bad("functionTimeoutSeconds must be positive")
	}
	ids := map[string]bool{}
	for _, t := range s.Tables {
		if t.LogicalID == "" || t.Name == "" {
			bad("table %q needs logicalId and name", t.Name)
		}
		if ids[t.LogicalID] {
			bad("duplicate logicalId %q", t.LogicalID)
		}
		ids[t.LogicalID] = true
		keys := []Key{t.HashKey}
		if t.RangeKey != nil {
			keys = append(keys, *t.RangeKey)
		}
		for _, g := range t.GlobalSecondaryIndexes {
			if g.Name == "" {
				bad("table %s: index without a name", t.LogicalID)
			}
			if g.Projection != "KEYS_ONLY" && g.Projection != "ALL" {
				bad("table %s index %s: projection must be KEYS_ONLY or ALL", t.LogicalID, g.Name)
			}
			keys = append(keys, g.HashKey)
			if g.RangeKey != nil {
				keys = append(keys, *g.RangeKey)
			}
		}
		types := map[string]string{}
		for _, k := range keys {
			if k.Name == "" || (k.Type != "S" && k.Type != "N" && k.Type != "B") {
				bad("table %s: key %q needs a name and a type of S, N or B", t.LogicalID, k.Name)
			}
			if prev, ok := types[k.Name]; ok && prev != k.Type {
				bad("table %s: attribute %s has types %s and %s", t.LogicalID, k.Name, prev, k.Type)
			}
			types[k.Name] = k.Type
		}
	}
	queues := map[string]Queue{}
	for _, q := range s.Queues {
		if ids[q.LogicalID] {
			bad("duplicate logicalId %q", q.LogicalID)
		}
		ids[q.LogicalID] = true
		queues[q.LogicalID] = q
		if q.LogicalID == "" || q.Name == "" {
			bad("queue %q needs logicalId and name", q.Name)
		}
		if q.FIFO != strings.HasSuffix(q.Name, ".fifo") {
			bad("queue %s: a FIFO queue's name ends in .fifo, and only a FIFO queue's", q.LogicalID)
		}
		if q.VisibilityTimeoutSeconds < 0 || q.VisibilityTimeoutSeconds > 43200 {
			bad("queue %s: visibility timeout out of SQS's range 0..43200", q.LogicalID)
		}
		if q.MessageRetentionSeconds != 0 && (q.MessageRetentionSeconds < 60 || q.MessageRetentionSeconds > 1209600) {
			bad("queue %s: retention out of SQS's range 60..1209600", q.LogicalID)
		}
	}
	for _, q := range s.Queues {
		if q.Redrive == nil {
			continue
		}
		// Lambda's guidance: visibility at least six times the function
		// timeout, so a batch that is retried inside one invocation
		// window is not redelivered to a second consumer.
		if q.VisibilityTimeoutSeconds < 6*s.FunctionTimeoutSeconds {
			bad("queue %s: visibility %ds is below 6 x the function timeout (%ds)", q.LogicalID, q.VisibilityTimeoutSeconds, 6*s.FunctionTimeoutSeconds)
		}
		if q.Redrive.MaxReceiveCount <= 2*libraryDefaultMaxAttempts {
			bad("queue %s: maxReceiveCount %d must be well above the library's %d attempts", q.LogicalID, q.Redrive.MaxReceiveCount, libraryDefaultMaxAttempts)
		}
		dlq, ok := queues[q.Redrive.DeadLetterQueue]
		switch {
		case !ok:
			bad("queue %s: dead-letter queue %q is not described", q.LogicalID, q.Redrive.DeadLetterQueue)
		case dlq.FIFO != q.FIFO:
			bad("queue %s: a FIFO queue needs a FIFO dead-letter queue, a standard one a standard one", q.LogicalID)
		case dlq.Redrive != nil:
			bad("queue %s: dead-letter queue %s must not redrive itself", q.LogicalID, dlq.LogicalID)
		case dlq.MessageRetentionSeconds != 0 && dlq.MessageRetentionSeconds < q.MessageRetentionSeconds:
			// SQS keeps a message's original enqueue time when it is
			// moved, so a shorter DLQ retention would drop it early.
			bad("queue %s: dead-letter queue must keep messages at least as long as the source", q.LogicalID)
		}
	}
	return errors.Join(errs...)
}

// WithPrefix returns a copy whose resource names all start with prefix.
func (s Spec) WithPrefix(prefix string) Spec {
	out := s
	out.Tables = append([]Table(nil), s.Tables...)
	out.Queues = append([]Queue(nil), s.Queues...)
	for i := range out.Tables {
		out.Tables[i].Name = prefix + out.Tables[i].Name
	}
	for i := range out.Queues {
		out.Queues[i].Name = prefix + out.Queues[i].Name
	}
	return out
}

// InTemplate reports whether a resource with this flag belongs in template.yaml.
func InTemplate(flag *bool) bool { return flag == nil || *flag }
