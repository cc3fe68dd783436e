package main

import (
	"errors"
	"strings"
	"testing"
)

func TestResourcesJSONIsValid(t *testing.T) {
	t.Parallel()
	spec, err := LoadSpec("../resources.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(spec.Tables) == 0 || len(spec.Queues) == 0 {
		t.Fatalf("resources.json describes %d tables and %d queues", len(spec.Tables), len(spec.Queues))
	}
}

func TestValidateRejects(t *testing.T) {
	t.Parallel()
	base := func() Spec {
		return Spec{
			FunctionTimeoutSeconds: 30,
			Tables:                 []Table{{LogicalID: "T", Name: "t", HashKey: Key{Name: "pk", Type: "S"}}},
			Queues: []Queue{
				{LogicalID: "DLQ", Name: "dlq", MessageRetentionSeconds: 1209600},
				{LogicalID: "Q", Name: "q", VisibilityTimeoutSeconds: 180, Redrive: &Redrive{DeadLetterQueue: "DLQ", MaxReceiveCount: 15}},
			},
		}
	}
	if err := base().Validate(); err != nil {
		t.Fatalf("base spec: %v", err)
	}
	for name, tc := range map[string]struct {
		mutate func(*Spec)
		want   string
	}{
		"visibility below 6x timeout": {func(s *Spec) { s.Queues[1].VisibilityTimeoutSeconds = 179 }, "6 x the function timeout"},
		"maxReceiveCount too low":     {func(s *Spec) { s.Queues[1].Redrive.MaxReceiveCount = 5 }, "well above"},
		"unknown DLQ":                 {func(s *Spec) { s.Queues[1].Redrive.DeadLetterQueue = "nope" }, "not described"},
		"fifo name without flag":      {func(s *Spec) { s.Queues[0].Name = "dlq.fifo" }, "ends in .fifo"},
		"fifo source, standard DLQ": {func(s *Spec) {
			s.Queues[1].FIFO, s.Queues[1].Name = true, "q.fifo"
		}, "FIFO dead-letter queue"},
		"short DLQ retention": {func(s *Spec) {
			s.Queues[0].MessageRetentionSeconds, s.Queues[1].MessageRetentionSeconds = 60, 120
		}, "at least as long"},
		"bad key type": {func(s *Spec) { s.Tables[0].HashKey.Type = "X" }, "type of S, N or B"},
		"conflicting attribute types": {func(s *Spec) {
			s.Tables[0].GlobalSecondaryIndexes = []Index{{Name: "i", HashKey: Key{Name: "pk", Type: "N"}, Projection: "ALL"}}
		}, "has types"},
		"duplicate logical ID": {func(s *Spec) { s.Queues[0].LogicalID = "T" }, "duplicate"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := base()
			tc.mutate(&s)
			err := s.Validate()
			if !errors.Is(err, errInvalidSpec) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate() = %v, want an invalid-spec error mentioning %q", err, tc.want)
			}
		})
	}
}

func TestWithPrefixKeepsFIFOSuffix(t *testing.T) {
	t.Parallel()
	spec, err := LoadSpec("../resources.json")
	if err != nil {
		t.Fatal(err)
	}
	p := spec.WithPrefix("x-")
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	if spec.Queues[0].Name == p.Queues[0].Name {
		t.Fatal("WithPrefix changed the original spec or did nothing")
	}
}
