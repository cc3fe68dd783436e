package dynamotest

import (
	"bytes"
	"fmt"
	"math/big"
	"regexp"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// dec is a DynamoDB number: i × 10^-scale, exact, as DynamoDB keeps up to
// 38 significant digits without rounding.
type dec struct {
	i     *big.Int
	scale int
}

var numberSyntax = regexp.MustCompile(`^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$`)

// parseNumber reads a number as DynamoDB accepts it, within its range
// (38 significant digits, magnitudes from 1E-130 to below 1E+126).
func parseNumber(s string) (dec, error) {
	if !numberSyntax.MatchString(s) {
		return dec{}, validation("A value provided cannot be converted into a number")
	}
	exp := 0
	if k := strings.IndexAny(s, "eE"); k >= 0 {
		if _, err := fmt.Sscan(s[k+1:], &exp); err != nil {
			return dec{}, validation("A value provided cannot be converted into a number")
		}
		s = s[:k]
	}
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimLeft(s, "+-")
	frac := 0
	if k := strings.IndexByte(s, '.'); k >= 0 {
		frac = len(s) - k - 1
		s = s[:k] + s[k+1:]
	}
	i, ok := new(big.Int).SetString(s, 10)
	if !ok {
		return dec{}, validation("A value provided cannot be converted into a number")
	}
	if neg {
		i.Neg(i)
	}
	d := dec{i: i, scale: frac - exp}
	if err := d.trim().inRange(); err != nil {
		return dec{}, err
	}
	return d, nil
}

// trim removes trailing zeros from the digits.
func (d dec) trim() dec {
	if d.i.Sign() == 0 {
		return dec{i: new(big.Int), scale: 0}
	}
	ten := big.NewInt(10)
	i := new(big.Int).Set(d.i)
	var q, r big.Int
	for {
		q.QuoRem(i, ten, &r)
		if r.Sign() != 0 {
			break
		}
		i.Set(&q)
		d.scale--
	}
	return dec{i: i, scale: d.scale}
}

func (d dec) digits() int {
	return len(new(big.Int).Abs(d.i).String())
}

func (d dec) inRange() error {
	if d.i.Sign() == 0 {
		return nil
	}
	n := d.digits()
	if n > 38 {
		return validation("Attempting to store more than 38 significant digits in a Number")
	}
	// The magnitude is about 10^(n-1-scale).
	mag := n - 1 - d.scale
	if mag > 125 {
		return validation("Number overflow. Attempting to store a number with magnitude larger than supported range")
	}
	if mag < -130 {
		return validation("Number underflow. Attempting to store a number with magnitude smaller than supported range")
	}
	return nil
}

// String formats d without an exponent, keeping its scale: the form
// DynamoDB gives the result of arithmetic (1.50 + 1.50 is 3.00).
func (d dec) String() string {
	s := new(big.Int).Abs(d.i).String()
	sign := ""
	if d.i.Sign() < 0 {
		sign = "-"
	}
	switch {
	case d.scale <= 0:
		return sign + s + strings.Repeat("0", -d.scale)
	case d.scale >= len(s):
		return sign + "0." + strings.Repeat("0", d.scale-len(s)) + s
	default:
		return sign + s[:len(s)-d.scale] + "." + s[len(s)-d.scale:]
	}
}

func align(a, b dec) (*big.Int, *big.Int, int) {
	scale := max(a.scale, b.scale)
	x := new(big.Int).Mul(a.i, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(scale-a.scale)), nil))
	y := new(big.Int).Mul(b.i, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(scale-b.scale)), nil))
	return x, y, scale
}

func (d dec) cmp(o dec) int {
	x, y, _ := align(d, o)
	return x.Cmp(y)
}

// canonical is a number as DynamoDB Local stores it when it puts an item
// (top-level numbers and number sets): without trailing zeros or an
// exponent ("1.50" is "1.5", "1e2" is "100").
func canonical(n string) string {
	d, err := parseNumber(n)
	if err != nil {
		return n
	}
	return d.trim().String()
}

// putForm is a value as a put stores it: its numbers and number sets in
// canonical form, other values (and numbers inside lists and maps) as
// written.
func putForm(v types.AttributeValue) types.AttributeValue {
	switch v := v.(type) {
	case *types.AttributeValueMemberN:
		return &types.AttributeValueMemberN{Value: canonical(v.Value)}
	case *types.AttributeValueMemberNS:
		out := make([]string, len(v.Value))
		for i, e := range v.Value {
			out[i] = canonical(e)
		}
		return &types.AttributeValueMemberNS{Value: out}
	}
	return v
}

// add and sub give the exact result at the larger scale of the two, as
// DynamoDB does; a result over 38 digits is refused.
func (d dec) add(o dec) (dec, error) {
	x, y, s := align(d, o)
	return dec{i: x.Add(x, y), scale: max(s, 0)}.precise()
}

func (d dec) sub(o dec) (dec, error) {
	x, y, s := align(d, o)
	return dec{i: x.Sub(x, y), scale: max(s, 0)}.precise()
}

func (d dec) precise() (dec, error) {
	if d.digits() > 38 {
		return dec{}, validation("DynamoDB only supports precision up to 38 digits")
	}
	return d, d.trim().inRange()
}

// typeName is DynamoDB's name of an attribute value's type.
func typeName(v types.AttributeValue) string {
	switch v.(type) {
	case *types.AttributeValueMemberS:
		return "S"
	case *types.AttributeValueMemberN:
		return "N"
	case *types.AttributeValueMemberB:
		return "B"
	case *types.AttributeValueMemberSS:
		return "SS"
	case *types.AttributeValueMemberNS:
		return "NS"
	case *types.AttributeValueMemberBS:
		return "BS"
	case *types.AttributeValueMemberBOOL:
		return "BOOL"
	case *types.AttributeValueMemberNULL:
		return "NULL"
	case *types.AttributeValueMemberL:
		return "L"
	case *types.AttributeValueMemberM:
		return "M"
	}
	return fmt.Sprintf("%T", v)
}

// normalize checks a value a request supplies and returns a deep copy of
// it. Numbers keep the form they were written in (DynamoDB Local returns
// "1.50" as "1.50"); they compare by value.
func normalize(v types.AttributeValue) (types.AttributeValue, error) {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return &types.AttributeValueMemberS{Value: v.Value}, nil
	case *types.AttributeValueMemberN:
		if _, err := parseNumber(v.Value); err != nil {
			return nil, err
		}
		return &types.AttributeValueMemberN{Value: v.Value}, nil
	case *types.AttributeValueMemberB:
		return &types.AttributeValueMemberB{Value: bytes.Clone(orEmpty(v.Value))}, nil
	case *types.AttributeValueMemberBOOL:
		return &types.AttributeValueMemberBOOL{Value: v.Value}, nil
	case *types.AttributeValueMemberNULL:
		if !v.Value {
			return nil, validation("One or more parameter values were invalid: Null attribute value types must have the value of true")
		}
		return &types.AttributeValueMemberNULL{Value: true}, nil
	case *types.AttributeValueMemberSS:
		if len(v.Value) == 0 {
			return nil, validation("One or more parameter values were invalid: An string set  may not be empty")
		}
		out := slices.Clone(v.Value)
		slices.Sort(out)
		if len(slices.Compact(slices.Clone(out))) != len(out) {
			return nil, validation("One or more parameter values were invalid: Input collection contains duplicates")
		}
		return &types.AttributeValueMemberSS{Value: slices.Clone(v.Value)}, nil
	case *types.AttributeValueMemberNS:
		if len(v.Value) == 0 {
			return nil, validation("One or more parameter values were invalid: An number set  may not be empty")
		}
		out := make([]string, len(v.Value))
		var seen []dec
		for i, s := range v.Value {
			d, err := parseNumber(s)
			if err != nil {
				return nil, err
			}
			if slices.ContainsFunc(seen, func(o dec) bool { return o.cmp(d) == 0 }) {
				return nil, validation("One or more parameter values were invalid: Input collection contains duplicates")
			}
			seen = append(seen, d)
			out[i] = s
		}
		return &types.AttributeValueMemberNS{Value: out}, nil
	case *types.AttributeValueMemberBS:
		if len(v.Value) == 0 {
			return nil, validation("One or more parameter values were invalid: An binary set  may not be empty")
		}
		out := make([][]byte, len(v.Value))
		for i, b := range v.Value {
			if slices.ContainsFunc(out[:i], func(o []byte) bool { return bytes.Equal(o, b) }) {
				return nil, validation("One or more parameter values were invalid: Input collection contains duplicates")
			}
			out[i] = bytes.Clone(orEmpty(b))
		}
		return &types.AttributeValueMemberBS{Value: out}, nil
	case *types.AttributeValueMemberL:
		out := make([]types.AttributeValue, len(v.Value))
		for i, e := range v.Value {
			n, err := normalize(e)
			if err != nil {
				return nil, err
			}
			out[i] = n
		}
		return &types.AttributeValueMemberL{Value: out}, nil
	case *types.AttributeValueMemberM:
		out := make(map[string]types.AttributeValue, len(v.Value))
		for k, e := range v.Value {
			n, err := normalize(e)
			if err != nil {
				return nil, err
			}
			out[k] = n
		}
		return &types.AttributeValueMemberM{Value: out}, nil
	case nil:
		return nil, validation("Supplied AttributeValue is empty, must contain exactly one of the supported datatypes")
	}
	return nil, unsupported(fmt.Sprintf("attribute value of type %T", v), "")
}

func orEmpty(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// clone deep-copies a stored value.
func clone(v types.AttributeValue) types.AttributeValue {
	n, err := normalize(v)
	if err != nil {
		// Stored values were normalized when they were written.
		panic(fmt.Sprintf("dynamotest: stored value does not normalize: %v", err))
	}
	return n
}

func cloneItem(it map[string]types.AttributeValue) map[string]types.AttributeValue {
	if it == nil {
		return nil
	}
	out := make(map[string]types.AttributeValue, len(it))
	for k, v := range it {
		out[k] = clone(v)
	}
	return out
}

// equal is DynamoDB's "=": the same type and the same value (numbers by
// value, sets as sets).
func equal(a, b types.AttributeValue) bool {
	switch a := a.(type) {
	case *types.AttributeValueMemberS:
		b, ok := b.(*types.AttributeValueMemberS)
		return ok && a.Value == b.Value
	case *types.AttributeValueMemberN:
		b, ok := b.(*types.AttributeValueMemberN)
		return ok && numCmp(a.Value, b.Value) == 0
	case *types.AttributeValueMemberB:
		b, ok := b.(*types.AttributeValueMemberB)
		return ok && bytes.Equal(a.Value, b.Value)
	case *types.AttributeValueMemberBOOL:
		b, ok := b.(*types.AttributeValueMemberBOOL)
		return ok && a.Value == b.Value
	case *types.AttributeValueMemberNULL:
		_, ok := b.(*types.AttributeValueMemberNULL)
		return ok
	case *types.AttributeValueMemberSS:
		b, ok := b.(*types.AttributeValueMemberSS)
		return ok && len(a.Value) == len(b.Value) && !slices.ContainsFunc(a.Value, func(s string) bool { return !slices.Contains(b.Value, s) })
	case *types.AttributeValueMemberNS:
		b, ok := b.(*types.AttributeValueMemberNS)
		return ok && len(a.Value) == len(b.Value) && !slices.ContainsFunc(a.Value, func(s string) bool { return !numSetHas(b.Value, s) })
	case *types.AttributeValueMemberBS:
		b, ok := b.(*types.AttributeValueMemberBS)
		return ok && len(a.Value) == len(b.Value) && !slices.ContainsFunc(a.Value, func(s []byte) bool { return !binSetHas(b.Value, s) })
	case *types.AttributeValueMemberL:
		b, ok := b.(*types.AttributeValueMemberL)
		return ok && slices.EqualFunc(a.Value, b.Value, equal)
	case *types.AttributeValueMemberM:
		b, ok := b.(*types.AttributeValueMemberM)
		if !ok || len(a.Value) != len(b.Value) {
			return false
		}
		for k, v := range a.Value {
			w, ok := b.Value[k]
			if !ok || !equal(v, w) {
				return false
			}
		}
		return true
	}
	return false
}

func numCmp(a, b string) int {
	x, err1 := parseNumber(a)
	y, err2 := parseNumber(b)
	if err1 != nil || err2 != nil {
		return strings.Compare(a, b)
	}
	return x.cmp(y)
}

func numSetHas(set []string, n string) bool {
	return slices.ContainsFunc(set, func(s string) bool { return numCmp(s, n) == 0 })
}

func binSetHas(set [][]byte, b []byte) bool {
	return slices.ContainsFunc(set, func(s []byte) bool { return bytes.Equal(s, b) })
}

// order compares two scalars of one type (S, N or B); ok is false for any
// other pair, which makes every ordering comparison false.
func order(a, b types.AttributeValue) (c int, ok bool) {
	switch a := a.(type) {
	case *types.AttributeValueMemberS:
		if b, ok := b.(*types.AttributeValueMemberS); ok {
			return strings.Compare(a.Value, b.Value), true
		}
	case *types.AttributeValueMemberN:
		if b, ok := b.(*types.AttributeValueMemberN); ok {
			return numCmp(a.Value, b.Value), true
		}
	case *types.AttributeValueMemberB:
		if b, ok := b.(*types.AttributeValueMemberB); ok {
			return bytes.Compare(a.Value, b.Value), true
		}
	}
	return 0, false
}
