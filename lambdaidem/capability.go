package lambdaidem

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

// writeKinds names the types of completion writes a store commits, for
// errors.
func writeKinds(c idemstore.Capabilities) string {
	if len(c.CompletionWrites) == 0 {
		return "no writes"
	}
	names := make([]string, len(c.CompletionWrites))
	for i, t := range c.CompletionWrites {
		names[i] = t.String()
	}
	return strings.Join(names, " and ")
}

// storeName is the store's name for errors.
func storeName(c idemstore.Capabilities) string {
	if c.Store == "" {
		return "the store"
	}
	return "the " + c.Store + " store"
}

// acceptWrite checks a completion write as the handler adds it, after the
// writes added before it: its type against the types the store declares
// it commits (or, for a store that declares nothing, the types the handler
// declared with WithCompletionWrites, when it declared any), and all of
// them with the store's own check.
func (e *engine) acceptWrite(lease Lease, added []any, w any) error {
	t := reflect.TypeOf(w)
	if caps, ok := idemstore.CapabilitiesOf(e.store); ok {
		if !caps.CommitsWrite(t) {
			return fmt.Errorf("%w: %s commits %s with a completion, not %T", ErrUnsupportedWrite, storeName(caps), writeKinds(caps), w)
		}
		if caps.CheckWrite != nil {
			return caps.CheckWrite(lease, append(slices.Clip(added), w))
		}
		return nil
	}
	if len(e.c.writeKinds) > 0 && !slices.Contains(e.c.writeKinds, t) {
		return fmt.Errorf("%w: %T, not a type given to WithCompletionWrites", ErrUnsupportedWrite, w)
	}
	return nil
}
