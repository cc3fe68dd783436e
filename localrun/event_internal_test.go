package localrun

import (
	"errors"
	"testing"
	"time"
)

func TestFailedItems(t *testing.T) {
	t.Parallel()
	batch := map[string]bool{"m1": true, "m2": true}
	for _, tc := range []struct {
		name   string
		resp   string
		ok     bool
		failed []string
	}{
		{"empty response", ``, true, nil},
		{"null response", `null`, true, nil},
		{"empty object", `{}`, true, nil},
		{"null list", `{"batchItemFailures":null}`, true, nil},
		{"empty list", `{"batchItemFailures":[]}`, true, nil},
		{"one failure", `{"batchItemFailures":[{"itemIdentifier":"m2"}]}`, true, []string{"m2"}},
		{"repeated failure", `{"batchItemFailures":[{"itemIdentifier":"m2"},{"itemIdentifier":"m2"}]}`, true, []string{"m2"}},
		{"unknown id", `{"batchItemFailures":[{"itemIdentifier":"m3"}]}`, false, nil},
		{"empty id", `{"batchItemFailures":[{"itemIdentifier":""}]}`, false, nil},
		{"null id", `{"batchItemFailures":[{"itemIdentifier":null}]}`, false, nil},
		{"numeric id", `{"batchItemFailures":[{"itemIdentifier":1}]}`, false, nil},
		{"wrong key", `{"batchItemFailures":[{"itemId":"m1"}]}`, false, nil},
		{"not JSON", `oops`, false, nil},
		{"a string", `"m1"`, false, nil},
		{"list not array", `{"batchItemFailures":"m1"}`, false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			failed, ok, why := failedItems([]byte(tc.resp), batch)
			if ok != tc.ok {
				t.Fatalf("ok = %v (%s), want %v", ok, why, tc.ok)
			}
			if len(failed) != len(tc.failed) {
				t.Fatalf("failed = %v, want %v", failed, tc.failed)
			}
			for _, id := range tc.failed {
				if !failed[id] {
					t.Fatalf("failed = %v, want %v", failed, tc.failed)
				}
			}
		})
	}
}

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	base := Config{Bootstrap: "bootstrap", QueueURL: "http://q/123/orders", SQS: nopSQS{}}
	for _, tc := range []struct {
		name   string
		mutate func(*Config)
		ok     bool
	}{
		{"defaults", func(*Config) {}, true},
		{"no bootstrap", func(c *Config) { c.Bootstrap = "" }, false},
		{"no queue", func(c *Config) { c.QueueURL = "" }, false},
		{"no client", func(c *Config) { c.SQS = nil }, false},
		{"batch above 10 without window", func(c *Config) { c.BatchSize = 11 }, false},
		{"batch above 10 with window", func(c *Config) { c.BatchSize = 100; c.BatchingWindow = time.Second }, true},
		{"batch too big", func(c *Config) { c.BatchSize = 10001; c.BatchingWindow = time.Second }, false},
		{"window too long", func(c *Config) { c.BatchingWindow = 301 * time.Second }, false},
		{"fifo window", func(c *Config) { c.QueueURL += ".fifo"; c.BatchingWindow = time.Second }, false},
		{"fifo batch", func(c *Config) { c.QueueURL += ".fifo"; c.BatchSize = 20; c.BatchingWindow = time.Second }, false},
		{"negative concurrency", func(c *Config) { c.MaxConcurrency = -1 }, false},
		{"timeout too long", func(c *Config) { c.FunctionTimeout = 901 * time.Second }, false},
		{"memory too small", func(c *Config) { c.MemoryMB = 64 }, false},
		{"poll wait too long", func(c *Config) { c.PollWait = 21 * time.Second }, false},
		{"bad env", func(c *Config) { c.Env = []string{"NOVALUE"} }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := base
			tc.mutate(&c)
			_, err := New(c)
			if tc.ok && err != nil {
				t.Fatalf("New: %v", err)
			}
			if !tc.ok && !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("New: %v, want ErrInvalidConfig", err)
			}
		})
	}
}
