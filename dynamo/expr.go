package dynamo

import (
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// expr collects the attribute names and values of one request's
// expressions. Every attribute goes through a name placeholder: "status" is
// a reserved word, and doing it everywhere means no later attribute can trip
// over the reserved-word list. DynamoDB rejects unused placeholders, so only
// what an expression mentions is registered.
type expr struct {
	names  map[string]string
	values map[string]types.AttributeValue
	set    []string
	remove []string
	add    []string
}

func newExpr() *expr {
	return &expr{names: map[string]string{}, values: map[string]types.AttributeValue{}}
}

// n returns the placeholder of an attribute name.
func (e *expr) n(attr string) string {
	ph := "#" + attr
	e.names[ph] = attr
	return ph
}

// v returns a placeholder for a value.
func (e *expr) v(av types.AttributeValue) string {
	ph := ":v" + strconv.Itoa(len(e.values))
	e.values[ph] = av
	return ph
}

func (e *expr) s(v string) string { return e.v(strAV(v)) }
func (e *expr) num(v int64) string {
	return e.v(numAV(v))
}

// Set adds "attr = value" to the update's SET clause.
func (e *expr) Set(attr string, av types.AttributeValue) {
	e.set = append(e.set, e.n(attr)+" = "+e.v(av))
}

// SetIfNotExists adds "attr = if_not_exists(attr, value)".
func (e *expr) SetIfNotExists(attr string, av types.AttributeValue) {
	n := e.n(attr)
	e.set = append(e.set, n+" = if_not_exists("+n+", "+e.v(av)+")")
}

// SetOrRemove sets a string attribute, or removes it when v is empty.
func (e *expr) SetOrRemove(attr, v string) {
	if v == "" {
		e.Remove(attr)
		return
	}
	e.Set(attr, strAV(v))
}

// Remove adds attr to the REMOVE clause.
func (e *expr) Remove(attr string) { e.remove = append(e.remove, e.n(attr)) }

// Add adds "attr value" to the ADD clause (numbers: an absent attribute
// counts as 0).
func (e *expr) Add(attr string, delta int64) {
	e.add = append(e.add, e.n(attr)+" "+e.num(delta))
}

// update renders the update expression.
func (e *expr) update() string {
	var parts []string
	if len(e.set) > 0 {
		parts = append(parts, "SET "+strings.Join(e.set, ", "))
	}
	if len(e.remove) > 0 {
		parts = append(parts, "REMOVE "+strings.Join(e.remove, ", "))
	}
	if len(e.add) > 0 {
		parts = append(parts, "ADD "+strings.Join(e.add, ", "))
	}
	return strings.Join(parts, " ")
}

// unexpired is the condition "the item has not expired at now": expiry is
// enforced here, never left to TTL, which deletes late. An item without
// expires_at never expires.
func (e *expr) unexpired(nowSecs int64) string {
	n := e.n(attrExpiresAt)
	return "(attribute_not_exists(" + n + ") OR " + n + " >= " + e.num(nowSecs) + ")"
}

// valuesOrNil returns nil for no values: DynamoDB rejects an empty map.
func (e *expr) valuesOrNil() map[string]types.AttributeValue {
	if len(e.values) == 0 {
		return nil
	}
	return e.values
}
