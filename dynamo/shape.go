package dynamo

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Limits of a transaction's writes that hold whatever the tables hold:
// DynamoDB, or the SDK before it sends anything, refuses a write that
// breaks one on every try, so the store refuses it first.
const (
	maxSortKeyBytes  = 1024            // a sort key value
	maxKeyNameBytes  = 255             // a key attribute's name
	maxDepth         = 32              // levels of nested values, the attribute itself the first
	maxSubstitutions = 2 * 1024 * 1024 // an action's ExpressionAttributeNames and ExpressionAttributeValues together
	maxDigits        = 38              // significant digits of a number
	minExponent      = -130            // a number's smallest magnitude is 1E-130
	maxExponent      = 125             // its largest is below 1E+126
)

// writeShape is what checkAction reads from any of a write's four kinds.
type writeShape struct {
	kind   string
	table  string
	key    map[string]types.AttributeValue // Update, Delete, ConditionCheck
	item   map[string]types.AttributeValue // Put
	exprs  map[string]*string              // by parameter name
	names  map[string]string
	values map[string]types.AttributeValue
	rv     types.ReturnValuesOnConditionCheckFailure
}

func shapeOf(a types.TransactWriteItem) writeShape {
	switch {
	case a.Put != nil:
		p := a.Put
		return writeShape{kind: "Put", table: aws.ToString(p.TableName), item: p.Item,
			exprs: map[string]*string{"ConditionExpression": p.ConditionExpression},
			names: p.ExpressionAttributeNames, values: p.ExpressionAttributeValues, rv: p.ReturnValuesOnConditionCheckFailure}
	case a.Update != nil:
		u := a.Update
		return writeShape{kind: "Update", table: aws.ToString(u.TableName), key: u.Key,
			exprs: map[string]*string{"UpdateExpression": u.UpdateExpression, "ConditionExpression": u.ConditionExpression},
			names: u.ExpressionAttributeNames, values: u.ExpressionAttributeValues, rv: u.ReturnValuesOnConditionCheckFailure}
	case a.Delete != nil:
		d := a.Delete
		return writeShape{kind: "Delete", table: aws.ToString(d.TableName), key: d.Key,
			exprs: map[string]*string{"ConditionExpression": d.ConditionExpression},
			names: d.ExpressionAttributeNames, values: d.ExpressionAttributeValues, rv: d.ReturnValuesOnConditionCheckFailure}
	case a.ConditionCheck != nil:
		c := a.ConditionCheck
		return writeShape{kind: "ConditionCheck", table: aws.ToString(c.TableName), key: c.Key,
			exprs: map[string]*string{"ConditionExpression": c.ConditionExpression},
			names: c.ExpressionAttributeNames, values: c.ExpressionAttributeValues, rv: c.ReturnValuesOnConditionCheckFailure}
	}
	return writeShape{}
}

// checkAction refuses a write (write i of the completion, one action) that
// DynamoDB would refuse for its form, whatever the tables hold, or that
// the SDK would refuse before sending it: a missing or malformed table
// name, key, item or required expression; a value DynamoDB cannot store
// (an empty or repeated set member, a number it cannot hold, a NULL that
// is not true, a nil value, nesting deeper than 32 levels, an empty
// attribute name); a key attribute that is not a non-empty string, number
// or binary within the key size limits; an expression over 4 KB; a
// placeholder over 255 bytes, not of the form #name or :value, defined
// and unused, or used and undefined; an empty map of placeholders; more
// than 2 MB of placeholders' names and values; an unknown
// ReturnValuesOnConditionCheckFailure. Without it, the SDK's refusals came
// back as a store unavailable, retried on every delivery.
func checkAction(i int, a types.TransactWriteItem) error {
	w := shapeOf(a)
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: write %d (%s): %s", ErrTransactionLimit, i, w.kind, fmt.Sprintf(format, args...))
	}
	if err := CheckTableName(w.table); err != nil {
		return bad("%v", err)
	}
	switch w.kind {
	case "Put":
		if len(w.item) == 0 {
			return bad("no item")
		}
		for name, v := range w.item {
			if name == "" {
				return bad("an attribute with an empty name")
			}
			if err := checkValue(v, 1); err != nil {
				return bad("attribute %q: %v", name, err)
			}
		}
	default:
		if err := checkKey(w.key); err != nil {
			return bad("key: %v", err)
		}
	}
	for param, e := range w.exprs {
		required := w.kind == "Update" && param == "UpdateExpression" || w.kind == "ConditionCheck" && param == "ConditionExpression"
		switch {
		case e == nil && required:
			return bad("no %s", param)
		case e != nil && strings.TrimSpace(*e) == "":
			return bad("an empty %s", param)
		case e != nil && len(*e) > maxExprBytes:
			return bad("a %s of %d bytes, over DynamoDB's %d", param, len(*e), maxExprBytes)
		}
	}
	if err := checkPlaceholders(w); err != nil {
		return bad("%v", err)
	}
	if w.rv != "" && !slices.Contains(w.rv.Values(), w.rv) {
		return bad("ReturnValuesOnConditionCheckFailure %q is none of %v", w.rv, w.rv.Values())
	}
	return nil
}

// placeholder is the form DynamoDB reads a placeholder in: '#' or ':' then
// letters, digits and underscores.
var placeholder = regexp.MustCompile(`[#:][A-Za-z0-9_]+`)

// checkPlaceholders checks a write's ExpressionAttributeNames and
// ExpressionAttributeValues against its expressions.
func checkPlaceholders(w writeShape) error {
	switch {
	case w.names != nil && len(w.names) == 0:
		return fmt.Errorf("ExpressionAttributeNames is empty (leave it nil)")
	case w.values != nil && len(w.values) == 0:
		return fmt.Errorf("ExpressionAttributeValues is empty (leave it nil)")
	}
	used := map[string]bool{}
	for _, e := range w.exprs {
		for _, p := range placeholder.FindAllString(aws.ToString(e), -1) {
			used[p] = true
		}
	}
	size := 0
	for p, name := range w.names {
		switch {
		case len(p) > maxPlaceholder:
			return fmt.Errorf("an attribute name placeholder of %d bytes, over DynamoDB's %d", len(p), maxPlaceholder)
		case !strings.HasPrefix(p, "#") || placeholder.FindString(p) != p:
			return fmt.Errorf("attribute name placeholder %q is not '#' then letters, digits or '_'", p)
		case name == "":
			return fmt.Errorf("placeholder %s stands for an empty attribute name", p)
		case !used[p]:
			return fmt.Errorf("placeholder %s is in no expression", p)
		}
		size += len(p) + len(name)
	}
	for p, v := range w.values {
		switch {
		case len(p) > maxPlaceholder:
			return fmt.Errorf("an attribute value placeholder of %d bytes, over DynamoDB's %d", len(p), maxPlaceholder)
		case !strings.HasPrefix(p, ":") || placeholder.FindString(p) != p:
			return fmt.Errorf("attribute value placeholder %q is not ':' then letters, digits or '_'", p)
		case !used[p]:
			return fmt.Errorf("placeholder %s is in no expression", p)
		}
		if err := checkValue(v, 1); err != nil {
			return fmt.Errorf("placeholder %s: %v", p, err)
		}
		size += len(p) + avSize(v)
	}
	for p := range used {
		_, name := w.names[p]
		_, value := w.values[p]
		if !name && !value {
			return fmt.Errorf("placeholder %s is used but not defined", p)
		}
	}
	if size > maxSubstitutions {
		return fmt.Errorf("placeholders of about %d bytes, over DynamoDB's %d", size, maxSubstitutions)
	}
	return nil
}

// checkKey checks a key: one or two attributes (partition and sort key),
// each a non-empty string, number or binary, at most 2048 bytes, and at
// most one of them over 1024 (a sort key's limit).
func checkKey(key map[string]types.AttributeValue) error {
	if len(key) == 0 || len(key) > 2 {
		return fmt.Errorf("%d attributes; a key has a partition key and at most a sort key", len(key))
	}
	long := 0
	for name, v := range key {
		if name == "" || len(name) > maxKeyNameBytes {
			return fmt.Errorf("attribute name of %d bytes; a key attribute's name has 1 to %d", len(name), maxKeyNameBytes)
		}
		n := 0
		switch v := v.(type) {
		case *types.AttributeValueMemberS:
			n = len(v.Value)
		case *types.AttributeValueMemberB:
			n = len(v.Value)
		case *types.AttributeValueMemberN:
			if _, err := number(v.Value); err != nil {
				return fmt.Errorf("%q: %v", name, err)
			}
			continue
		default:
			return fmt.Errorf("%q is a %T; a key attribute is a string, a number or a binary", name, v)
		}
		switch {
		case n == 0:
			return fmt.Errorf("%q is empty", name)
		case n > maxPKBytes:
			return fmt.Errorf("%q holds %d bytes, over DynamoDB's %d for a key", name, n, maxPKBytes)
		case n > maxSortKeyBytes:
			long++
		}
	}
	if long > 1 {
		return fmt.Errorf("both attributes hold over %d bytes, a sort key's limit", maxSortKeyBytes)
	}
	return nil
}

// checkValue checks a value at nesting level depth (an attribute's own
// value is at level 1).
func checkValue(v types.AttributeValue, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("nested deeper than DynamoDB's %d levels", maxDepth)
	}
	switch v := v.(type) {
	case *types.AttributeValueMemberS, *types.AttributeValueMemberB, *types.AttributeValueMemberBOOL:
		return nil
	case *types.AttributeValueMemberNULL:
		if !v.Value {
			return fmt.Errorf("a NULL whose Value is false (DynamoDB takes only true)")
		}
		return nil
	case *types.AttributeValueMemberN:
		_, err := number(v.Value)
		return err
	case *types.AttributeValueMemberSS:
		return distinct("string set", len(v.Value), func(i int) (string, error) { return v.Value[i], nil })
	case *types.AttributeValueMemberBS:
		return distinct("binary set", len(v.Value), func(i int) (string, error) { return string(v.Value[i]), nil })
	case *types.AttributeValueMemberNS:
		return distinct("number set", len(v.Value), func(i int) (string, error) { return number(v.Value[i]) })
	case *types.AttributeValueMemberL:
		for k, e := range v.Value {
			if err := checkValue(e, depth+1); err != nil {
				return fmt.Errorf("[%d]: %v", k, err)
			}
		}
		return nil
	case *types.AttributeValueMemberM:
		for name, e := range v.Value {
			if name == "" {
				return fmt.Errorf("a map entry with an empty name")
			}
			if err := checkValue(e, depth+1); err != nil {
				return fmt.Errorf(".%s: %v", name, err)
			}
		}
		return nil
	case nil:
		return fmt.Errorf("a nil value")
	default:
		return fmt.Errorf("a value of unknown type %T", v)
	}
}

// distinct checks a set: not empty, no member twice (members compared by
// key).
func distinct(what string, n int, key func(i int) (string, error)) error {
	if n == 0 {
		return fmt.Errorf("an empty %s (DynamoDB stores no empty set)", what)
	}
	seen := make(map[string]bool, n)
	for i := range n {
		k, err := key(i)
		if err != nil {
			return err
		}
		if seen[k] {
			return fmt.Errorf("a %s holding a member twice", what)
		}
		seen[k] = true
	}
	return nil
}

// numberForm is a decimal number as DynamoDB reads one: a sign, digits with
// or without a point, an exponent.
var numberForm = regexp.MustCompile(`^([+-]?)(\d*)(?:\.(\d*))?(?:[eE]([+-]?\d+))?$`)

// number checks a number DynamoDB must hold: a decimal of at most 38
// significant digits, zero or of magnitude from 1E-130 to below 1E+126.
// It returns the number in a canonical form (equal numbers, equal forms).
func number(s string) (string, error) {
	m := numberForm.FindStringSubmatch(s)
	if m == nil || m[2] == "" && m[3] == "" {
		return "", fmt.Errorf("%q is not a number", s)
	}
	digits := strings.TrimLeft(m[2]+m[3], "0")
	if digits == "" {
		return "0", nil
	}
	// The point sits after m[2]: the leading digit's power of ten is
	// len(m[2]) - 1 less the zeros before it.
	lead := len(m[2]) - 1 - (len(m[2]+m[3]) - len(digits))
	digits = strings.TrimRight(digits, "0")
	if len(digits) > maxDigits {
		return "", fmt.Errorf("%q has %d significant digits, over DynamoDB's %d", s, len(digits), maxDigits)
	}
	exp := 0
	if m[4] != "" {
		e := strings.TrimLeft(strings.TrimLeft(m[4], "+-"), "0")
		if len(e) > 9 {
			return "", fmt.Errorf("%q is beyond DynamoDB's range (1E-130 to 9.99...E+125)", s)
		}
		exp, _ = strconv.Atoi(e)
		if strings.HasPrefix(m[4], "-") {
			exp = -exp
		}
	}
	if p := lead + exp; p < minExponent || p > maxExponent {
		return "", fmt.Errorf("%q is beyond DynamoDB's range (1E-130 to 9.99...E+125)", s)
	}
	sign := ""
	if m[1] == "-" {
		sign = "-"
	}
	return fmt.Sprintf("%s%se%d", sign, digits, lead+exp), nil
}
