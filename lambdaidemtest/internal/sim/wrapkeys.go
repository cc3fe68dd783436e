package sim

import (
	"context"
	"errors"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

// Wrap's keys (Config.WrapKey): a key function of the input (WithWrapKey,
// "" ), the input's "key" field (WithKeyJSONField, "field") or Wrap's
// default, the SHA-256 of the input's JSON ("hash": every payload a key
// of its own, so no conflicts). With Config.BadKeys some requests have no
// key of their own (request.Bad): an empty key, a key function that
// panics or fails, an input that is not valid UTF-8. Each must be refused
// with ErrMissingKey (ErrMalformedBody for the input) and never run.

// wrapBad are the ways a Wrap request's key may not be one, per key mode.
var wrapBad = map[string][]string{
	"":      {"empty", "panic", "error", "utf8"},
	"field": {"empty", "utf8"},
	"hash":  {"utf8"},
}

// errKeyFunc is what a key function of a bad request returns.
var errKeyFunc = errors.New("simulated key function failure")

// wrapFunc builds the request streams' Wrap.
func (s *Scenario) wrapFunc(store idemstore.Store, opts []lambdaidem.Option) func(context.Context, request) (reply, error) {
	switch s.Cfg.WrapKey {
	case "field":
		opts = append(opts, lambdaidem.WithKeyJSONField("key"))
	case "hash":
	default:
		opts = append(opts, lambdaidem.WithWrapKey(func(rq request) (string, error) {
			switch rq.Bad {
			case "panic":
				panic("simulated key function panic on request " + rq.Key)
			case "error":
				return "", errKeyFunc
			}
			return rq.Key, nil
		}))
	}
	f := lambdaidem.Wrap(store, s.wrapped, opts...)
	return func(ctx context.Context, rq request) (reply, error) {
		switch rq.Bad {
		case "empty":
			rq.Key = ""
		case "utf8":
			rq.Key += "\xff"
		}
		out, err := f(ctx, rq)
		if rq.Bad != "" {
			want := lambdaidem.ErrMissingKey
			if rq.Bad == "utf8" {
				want = lambdaidem.ErrMalformedBody
			}
			if !errors.Is(err, want) {
				s.violate(InvProgress, "Wrap call %s whose key is not one (%s) returned %v: want an error wrapping %v, and no run", rq.id(), rq.Bad, err, want)
			}
		}
		return out, err
	}
}

// badRequest draws how a request's key is not one, or "".
func (s *Scenario) badRequest() string {
	c := s.Cfg
	if c.BadKeys <= 0 || s.w.rng.Float64() >= c.BadKeys {
		return ""
	}
	if c.HTTP {
		return badKeys[s.w.rng.IntN(len(badKeys))]
	}
	bad := wrapBad[c.WrapKey]
	return bad[s.w.rng.IntN(len(bad))]
}
