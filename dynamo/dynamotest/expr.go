package dynamotest

import (
	"bufio"
	"bytes"
	_ "embed"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// DynamoDB's reserved words: an expression must name such an attribute
// through ExpressionAttributeNames.
//
//go:embed reserved.txt
var reservedText []byte

var reserved = func() map[string]bool {
	m := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(reservedText))
	for sc.Scan() {
		if w := strings.TrimSpace(sc.Text()); w != "" {
			m[w] = true
		}
	}
	return m
}()

// A token of an expression.
type token struct {
	kind byte // 'i' identifier, '#' name placeholder, ':' value placeholder, 'n' number, 'p' punctuation, 0 end
	text string
	pos  int
}

func lex(kind, s string) ([]token, error) {
	var out []token
	for i := 0; i < len(s); {
		r, w := utf8.DecodeRuneInString(s[i:])
		switch {
		case unicode.IsSpace(r):
			i += w
		case r == '#' || r == ':':
			j := i + 1
			for j < len(s) && isWordByte(s[j]) {
				j++
			}
			if j == i+1 {
				return nil, syntaxError(kind, s, i)
			}
			out = append(out, token{kind: byte(r), text: s[i:j], pos: i})
			i = j
		case r < utf8.RuneSelf && isWordByte(byte(r)):
			j := i
			for j < len(s) && isWordByte(s[j]) {
				j++
			}
			t := token{kind: 'i', text: s[i:j], pos: i}
			if s[i] >= '0' && s[i] <= '9' {
				t.kind = 'n'
			}
			out = append(out, t)
			i = j
		default:
			for _, p := range []string{"<>", "<=", ">=", "=", "<", ">", "(", ")", ",", ".", "[", "]", "+", "-"} {
				if strings.HasPrefix(s[i:], p) {
					out = append(out, token{kind: 'p', text: p, pos: i})
					i += len(p)
					goto next
				}
			}
			return nil, syntaxError(kind, s, i)
		next:
		}
	}
	return append(out, token{pos: len(s)}), nil
}

func isWordByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func syntaxError(kind, s string, pos int) error {
	near := s[pos:]
	if len(near) > 20 {
		near = near[:20]
	}
	return validation(fmt.Sprintf("Invalid %s: Syntax error; token: %q, near: %q", kind, near, s))
}

// env resolves an operation's placeholders and notes which were used:
// DynamoDB refuses names and values that no expression uses.
type env struct {
	names      map[string]string
	values     map[string]types.AttributeValue
	usedNames  map[string]bool
	usedValues map[string]bool
}

func newEnv(names map[string]string, values map[string]types.AttributeValue) (*env, error) {
	e := &env{names: names, values: map[string]types.AttributeValue{}, usedNames: map[string]bool{}, usedValues: map[string]bool{}}
	for k, v := range values {
		n, err := normalize(v)
		if err != nil {
			return nil, validation(fmt.Sprintf("ExpressionAttributeValues contains invalid value: %s for key %s", strings.TrimPrefix(err.Error(), "ValidationException: "), k))
		}
		e.values[k] = n
	}
	return e, nil
}

// unused reports the names and values no expression used.
func (e *env) unused() error {
	var names, values []string
	for k := range e.names {
		if !e.usedNames[k] {
			names = append(names, k)
		}
	}
	for k := range e.values {
		if !e.usedValues[k] {
			values = append(values, k)
		}
	}
	slices.Sort(names)
	slices.Sort(values)
	if len(names) > 0 {
		return validation("Value provided in ExpressionAttributeNames unused in expressions: keys: {" + strings.Join(names, ", ") + "}")
	}
	if len(values) > 0 {
		return validation("Value provided in ExpressionAttributeValues unused in expressions: keys: {" + strings.Join(values, ", ") + "}")
	}
	return nil
}

// A path to an attribute: a top-level name, then map members and list
// indexes.
type path []step

type step struct {
	name  string
	index int // for a list index
	isIdx bool
}

func (p path) String() string {
	var b strings.Builder
	for i, s := range p {
		switch {
		case s.isIdx:
			fmt.Fprintf(&b, "[%d]", s.index)
		case i > 0:
			b.WriteString("." + s.name)
		default:
			b.WriteString(s.name)
		}
	}
	return b.String()
}

// overlaps reports whether one path is a prefix of the other.
func (p path) overlaps(q path) bool {
	n := min(len(p), len(q))
	return slices.Equal(p[:n], q[:n])
}

// An operand yields a value, or nothing (a missing attribute).
type operand interface {
	eval(item map[string]types.AttributeValue) (types.AttributeValue, bool, error)
}

type pathOp struct{ p path }
type valueOp struct{ v types.AttributeValue }
type sizeOp struct{ p path }
type ifNotExistsOp struct {
	p   path
	alt operand
}
type listAppendOp struct{ a, b operand }
type arithOp struct {
	op   string
	a, b operand
}

func (o pathOp) eval(item map[string]types.AttributeValue) (types.AttributeValue, bool, error) {
	v, ok := get(item, o.p)
	return v, ok, nil
}

func (o valueOp) eval(map[string]types.AttributeValue) (types.AttributeValue, bool, error) {
	return o.v, true, nil
}

func (o sizeOp) eval(item map[string]types.AttributeValue) (types.AttributeValue, bool, error) {
	v, ok := get(item, o.p)
	if !ok {
		return nil, false, nil
	}
	var n int
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		// Characters as DynamoDB counts them (UTF-16 units), not bytes.
		n = len(utf16.Encode([]rune(v.Value)))
	case *types.AttributeValueMemberB:
		n = len(v.Value)
	case *types.AttributeValueMemberSS:
		n = len(v.Value)
	case *types.AttributeValueMemberNS:
		n = len(v.Value)
	case *types.AttributeValueMemberBS:
		n = len(v.Value)
	case *types.AttributeValueMemberL:
		n = len(v.Value)
	case *types.AttributeValueMemberM:
		n = len(v.Value)
	default:
		return nil, false, nil
	}
	return &types.AttributeValueMemberN{Value: strconv.Itoa(n)}, true, nil
}

func (o ifNotExistsOp) eval(item map[string]types.AttributeValue) (types.AttributeValue, bool, error) {
	if v, ok := get(item, o.p); ok {
		return v, true, nil
	}
	return needed(o.alt, item)
}

func (o listAppendOp) eval(item map[string]types.AttributeValue) (types.AttributeValue, bool, error) {
	a, _, err := needed(o.a, item)
	if err != nil {
		return nil, false, err
	}
	b, _, err := needed(o.b, item)
	if err != nil {
		return nil, false, err
	}
	la, ok1 := a.(*types.AttributeValueMemberL)
	lb, ok2 := b.(*types.AttributeValueMemberL)
	if !ok1 || !ok2 {
		return nil, false, validation("Invalid UpdateExpression: Incorrect operand type for operator or function; operator or function: list_append, operand type: " + typeName(pick(ok1, b, a)))
	}
	return &types.AttributeValueMemberL{Value: append(slices.Clone(la.Value), lb.Value...)}, true, nil
}

func pick(first bool, a, b types.AttributeValue) types.AttributeValue {
	if first {
		return a
	}
	return b
}

func (o arithOp) eval(item map[string]types.AttributeValue) (types.AttributeValue, bool, error) {
	a, _, err := needed(o.a, item)
	if err != nil {
		return nil, false, err
	}
	b, _, err := needed(o.b, item)
	if err != nil {
		return nil, false, err
	}
	na, ok1 := a.(*types.AttributeValueMemberN)
	nb, ok2 := b.(*types.AttributeValueMemberN)
	if !ok1 || !ok2 {
		return nil, false, validation("An operand in the update expression has an incorrect data type")
	}
	x, _ := parseNumber(na.Value)
	y, _ := parseNumber(nb.Value)
	op := x.add
	if o.op == "-" {
		op = x.sub
	}
	r, err := op(y)
	if err != nil {
		return nil, false, err
	}
	return &types.AttributeValueMemberN{Value: r.String()}, true, nil
}

// needed evaluates an operand of an update, where a missing attribute is
// an error.
func needed(o operand, item map[string]types.AttributeValue) (types.AttributeValue, bool, error) {
	v, ok, err := o.eval(item)
	if err != nil {
		return nil, false, err
	}
	if !ok {
		return nil, false, validation("The provided expression refers to an attribute that does not exist in the item")
	}
	return v, true, nil
}

// get reads the value at p.
func get(item map[string]types.AttributeValue, p path) (types.AttributeValue, bool) {
	var cur types.AttributeValue = &types.AttributeValueMemberM{Value: item}
	for _, s := range p {
		switch c := cur.(type) {
		case *types.AttributeValueMemberM:
			if s.isIdx {
				return nil, false
			}
			v, ok := c.Value[s.name]
			if !ok {
				return nil, false
			}
			cur = v
		case *types.AttributeValueMemberL:
			if !s.isIdx || s.index >= len(c.Value) {
				return nil, false
			}
			cur = c.Value[s.index]
		default:
			return nil, false
		}
	}
	return cur, true
}

// A condition.
type cond interface {
	holds(item map[string]types.AttributeValue) bool
}

type cmpCond struct {
	op   string
	a, b operand
}
type betweenCond struct{ a, lo, hi operand }
type inCond struct {
	a    operand
	list []operand
}
type existsCond struct {
	p   path
	not bool
}
type typeCond struct {
	p path
	t string
}
type beginsCond struct {
	p   path
	pre operand
}
type containsCond struct {
	p path
	v operand
}
type andCond struct{ a, b cond }
type orCond struct{ a, b cond }
type notCond struct{ c cond }

func value(o operand, item map[string]types.AttributeValue) (types.AttributeValue, bool) {
	v, ok, err := o.eval(item)
	return v, ok && err == nil
}

func (c cmpCond) holds(item map[string]types.AttributeValue) bool {
	a, ok1 := value(c.a, item)
	b, ok2 := value(c.b, item)
	if !ok1 || !ok2 {
		return false
	}
	switch c.op {
	case "=":
		return equal(a, b)
	case "<>":
		return !equal(a, b)
	}
	n, ok := order(a, b)
	if !ok {
		return false
	}
	switch c.op {
	case "<":
		return n < 0
	case "<=":
		return n <= 0
	case ">":
		return n > 0
	default:
		return n >= 0
	}
}

func (c betweenCond) holds(item map[string]types.AttributeValue) bool {
	a, ok1 := value(c.a, item)
	lo, ok2 := value(c.lo, item)
	hi, ok3 := value(c.hi, item)
	if !ok1 || !ok2 || !ok3 {
		return false
	}
	x, ok1 := order(a, lo)
	y, ok2 := order(a, hi)
	return ok1 && ok2 && x >= 0 && y <= 0
}

func (c inCond) holds(item map[string]types.AttributeValue) bool {
	a, ok := value(c.a, item)
	if !ok {
		return false
	}
	for _, o := range c.list {
		if b, ok := value(o, item); ok && equal(a, b) {
			return true
		}
	}
	return false
}

func (c existsCond) holds(item map[string]types.AttributeValue) bool {
	_, ok := get(item, c.p)
	return ok != c.not
}

func (c typeCond) holds(item map[string]types.AttributeValue) bool {
	v, ok := get(item, c.p)
	return ok && typeName(v) == c.t
}

func (c beginsCond) holds(item map[string]types.AttributeValue) bool {
	v, ok1 := get(item, c.p)
	pre, ok2 := value(c.pre, item)
	if !ok1 || !ok2 {
		return false
	}
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		p, ok := pre.(*types.AttributeValueMemberS)
		return ok && strings.HasPrefix(v.Value, p.Value)
	case *types.AttributeValueMemberB:
		p, ok := pre.(*types.AttributeValueMemberB)
		return ok && bytes.HasPrefix(v.Value, p.Value)
	}
	return false
}

func (c containsCond) holds(item map[string]types.AttributeValue) bool {
	v, ok1 := get(item, c.p)
	x, ok2 := value(c.v, item)
	if !ok1 || !ok2 {
		return false
	}
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		s, ok := x.(*types.AttributeValueMemberS)
		return ok && strings.Contains(v.Value, s.Value)
	case *types.AttributeValueMemberB:
		b, ok := x.(*types.AttributeValueMemberB)
		return ok && bytes.Contains(v.Value, b.Value)
	case *types.AttributeValueMemberSS:
		s, ok := x.(*types.AttributeValueMemberS)
		return ok && slices.Contains(v.Value, s.Value)
	case *types.AttributeValueMemberNS:
		n, ok := x.(*types.AttributeValueMemberN)
		return ok && numSetHas(v.Value, n.Value)
	case *types.AttributeValueMemberBS:
		b, ok := x.(*types.AttributeValueMemberB)
		return ok && binSetHas(v.Value, b.Value)
	case *types.AttributeValueMemberL:
		return slices.ContainsFunc(v.Value, func(e types.AttributeValue) bool { return equal(e, x) })
	}
	return false
}

func (c andCond) holds(item map[string]types.AttributeValue) bool {
	return c.a.holds(item) && c.b.holds(item)
}

func (c orCond) holds(item map[string]types.AttributeValue) bool {
	return c.a.holds(item) || c.b.holds(item)
}

func (c notCond) holds(item map[string]types.AttributeValue) bool { return !c.c.holds(item) }

// parser reads one expression.
type parser struct {
	kind string // "ConditionExpression" or "UpdateExpression"
	src  string
	toks []token
	at   int
	env  *env
}

func newParser(kind, src string, e *env) (*parser, error) {
	toks, err := lex(kind, src)
	if err != nil {
		return nil, err
	}
	return &parser{kind: kind, src: src, toks: toks, env: e}, nil
}

func (p *parser) peek() token { return p.toks[p.at] }
func (p *parser) next() token {
	t := p.toks[p.at]
	if t.kind != 0 {
		p.at++
	}
	return t
}

func (p *parser) isPunct(s string) bool { t := p.peek(); return t.kind == 'p' && t.text == s }
func (p *parser) isWord(w string) bool {
	t := p.peek()
	return t.kind == 'i' && strings.EqualFold(t.text, w)
}

func (p *parser) expect(s string) error {
	if !p.isPunct(s) {
		return p.syntax()
	}
	p.next()
	return nil
}

func (p *parser) syntax() error { return syntaxError(p.kind, p.src, p.peek().pos) }

func (p *parser) invalid(msg string) error {
	return validation("Invalid " + p.kind + ": " + msg)
}

// path reads name(.name|[n])*.
func (p *parser) path() (path, error) {
	first, err := p.pathName()
	if err != nil {
		return nil, err
	}
	out := path{{name: first}}
	for {
		switch {
		case p.isPunct("."):
			p.next()
			n, err := p.pathName()
			if err != nil {
				return nil, err
			}
			out = append(out, step{name: n})
		case p.isPunct("["):
			p.next()
			t := p.next()
			if t.kind != 'n' {
				return nil, syntaxError(p.kind, p.src, t.pos)
			}
			i, err := strconv.Atoi(t.text)
			if err != nil {
				return nil, syntaxError(p.kind, p.src, t.pos)
			}
			if err := p.expect("]"); err != nil {
				return nil, err
			}
			out = append(out, step{index: i, isIdx: true})
		default:
			return out, nil
		}
	}
}

func (p *parser) pathName() (string, error) {
	t := p.next()
	switch t.kind {
	case '#':
		n, ok := p.env.names[t.text]
		if !ok {
			return "", p.invalid("An expression attribute name used in the document path is not defined; attribute name: " + t.text)
		}
		p.env.usedNames[t.text] = true
		return n, nil
	case 'i':
		if reserved[strings.ToLower(t.text)] {
			return "", p.invalid("Attribute name is a reserved keyword; reserved keyword: " + t.text)
		}
		return t.text, nil
	}
	return "", syntaxError(p.kind, p.src, t.pos)
}

func (p *parser) valueRef() (types.AttributeValue, error) {
	t := p.next()
	v, ok := p.env.values[t.text]
	if !ok {
		return nil, p.invalid("An expression attribute value used in expression is not defined; attribute value: " + t.text)
	}
	p.env.usedValues[t.text] = true
	return v, nil
}

// function reads a function call's name and opening parenthesis, if one
// is next.
func (p *parser) function() (string, bool) {
	t := p.peek()
	if t.kind != 'i' || p.toks[p.at+1].kind != 'p' || p.toks[p.at+1].text != "(" {
		return "", false
	}
	p.at += 2
	return t.text, true
}

// condition: or.
func (p *parser) condition() (cond, error) {
	a, err := p.and()
	if err != nil {
		return nil, err
	}
	for p.isWord("OR") {
		p.next()
		b, err := p.and()
		if err != nil {
			return nil, err
		}
		a = orCond{a, b}
	}
	return a, nil
}

func (p *parser) and() (cond, error) {
	a, err := p.not()
	if err != nil {
		return nil, err
	}
	for p.isWord("AND") {
		p.next()
		b, err := p.not()
		if err != nil {
			return nil, err
		}
		a = andCond{a, b}
	}
	return a, nil
}

func (p *parser) not() (cond, error) {
	if p.isWord("NOT") {
		p.next()
		c, err := p.not()
		if err != nil {
			return nil, err
		}
		return notCond{c}, nil
	}
	return p.primary()
}

func (p *parser) primary() (cond, error) {
	if p.isPunct("(") {
		p.next()
		c, err := p.condition()
		if err != nil {
			return nil, err
		}
		return c, p.expect(")")
	}
	save := p.at
	if name, ok := p.function(); ok {
		switch name {
		case "attribute_exists", "attribute_not_exists":
			pa, err := p.path()
			if err != nil {
				return nil, err
			}
			return existsCond{p: pa, not: name == "attribute_not_exists"}, p.expect(")")
		case "attribute_type":
			pa, err := p.path()
			if err != nil {
				return nil, err
			}
			if err := p.expect(","); err != nil {
				return nil, err
			}
			if p.peek().kind != ':' {
				return nil, p.syntax()
			}
			v, err := p.valueRef()
			if err != nil {
				return nil, err
			}
			s, ok := v.(*types.AttributeValueMemberS)
			if !ok || !slices.Contains([]string{"S", "SS", "N", "NS", "B", "BS", "BOOL", "NULL", "L", "M"}, s.Value) {
				return nil, p.invalid("Invalid attribute type name found; type: " + fmt.Sprint(v) + ", valid types: { B,NULL,SS,BOOL,L,BS,N,NS,S,M }")
			}
			return typeCond{p: pa, t: s.Value}, p.expect(")")
		case "begins_with", "contains":
			pa, err := p.path()
			if err != nil {
				return nil, err
			}
			if err := p.expect(","); err != nil {
				return nil, err
			}
			o, err := p.condOperand()
			if err != nil {
				return nil, err
			}
			if name == "begins_with" {
				if v, ok := o.(valueOp); ok && typeName(v.v) != "S" && typeName(v.v) != "B" {
					return nil, p.invalid("Incorrect operand type for operator or function; operator or function: begins_with, operand type: " + typeName(v.v))
				}
				return beginsCond{p: pa, pre: o}, p.expect(")")
			}
			return containsCond{p: pa, v: o}, p.expect(")")
		case "size":
			p.at = save // an operand: read it below
		default:
			return nil, p.invalid("Invalid function name; function: " + name)
		}
	}
	a, err := p.condOperand()
	if err != nil {
		return nil, err
	}
	switch {
	case p.isWord("BETWEEN"):
		p.next()
		lo, err := p.condOperand()
		if err != nil {
			return nil, err
		}
		if !p.isWord("AND") {
			return nil, p.syntax()
		}
		p.next()
		hi, err := p.condOperand()
		if err != nil {
			return nil, err
		}
		l, ok1 := lo.(valueOp)
		h, ok2 := hi.(valueOp)
		if ok1 && ok2 {
			if n, ok := order(l.v, h.v); ok && n > 0 {
				return nil, p.invalid("The BETWEEN operator requires upper bound to be greater than or equal to lower bound; lower bound operand: " + fmt.Sprint(l.v) + ", upper bound operand: " + fmt.Sprint(h.v))
			}
		}
		return betweenCond{a, lo, hi}, nil
	case p.isWord("IN"):
		p.next()
		if err := p.expect("("); err != nil {
			return nil, err
		}
		var list []operand
		for {
			o, err := p.condOperand()
			if err != nil {
				return nil, err
			}
			list = append(list, o)
			if !p.isPunct(",") {
				break
			}
			p.next()
		}
		return inCond{a, list}, p.expect(")")
	}
	t := p.next()
	if t.kind != 'p' || !slices.Contains([]string{"=", "<>", "<", "<=", ">", ">="}, t.text) {
		return nil, syntaxError(p.kind, p.src, t.pos)
	}
	b, err := p.condOperand()
	if err != nil {
		return nil, err
	}
	for _, o := range []operand{a, b} {
		if v, ok := o.(valueOp); ok && t.text != "=" && t.text != "<>" {
			if n := typeName(v.v); n != "S" && n != "N" && n != "B" {
				return nil, p.invalid("Incorrect operand type for operator or function; operator or function: " + t.text + ", operand type: " + n)
			}
		}
	}
	return cmpCond{t.text, a, b}, nil
}

// condOperand: path, :value or size(path).
func (p *parser) condOperand() (operand, error) {
	switch p.peek().kind {
	case ':':
		v, err := p.valueRef()
		return valueOp{v}, err
	case 'i':
		if name, ok := p.function(); ok {
			if name != "size" {
				return nil, p.invalid("The function is not allowed to be used this way in an expression; function: " + name)
			}
			pa, err := p.path()
			if err != nil {
				return nil, err
			}
			return sizeOp{pa}, p.expect(")")
		}
	}
	pa, err := p.path()
	return pathOp{pa}, err
}

// parseCondition parses a ConditionExpression.
func parseCondition(src string, e *env) (cond, error) {
	if strings.TrimSpace(src) == "" {
		return nil, validation("Invalid ConditionExpression: The expression can not be empty;")
	}
	p, err := newParser("ConditionExpression", src, e)
	if err != nil {
		return nil, err
	}
	c, err := p.condition()
	if err != nil {
		return nil, err
	}
	if p.peek().kind != 0 {
		return nil, p.syntax()
	}
	return c, nil
}

// An update's actions.
type update struct {
	set    []setAction
	remove []path
	add    []valueAction
	del    []valueAction
}

type setAction struct {
	p path
	v operand
}

type valueAction struct {
	p path
	v types.AttributeValue
}

func (u *update) paths() []path {
	var out []path
	for _, a := range u.set {
		out = append(out, a.p)
	}
	out = append(out, u.remove...)
	for _, a := range u.add {
		out = append(out, a.p)
	}
	for _, a := range u.del {
		out = append(out, a.p)
	}
	return out
}

// parseUpdate parses an UpdateExpression.
func parseUpdate(src string, e *env) (*update, error) {
	if strings.TrimSpace(src) == "" {
		return nil, validation("Invalid UpdateExpression: The expression can not be empty;")
	}
	p, err := newParser("UpdateExpression", src, e)
	if err != nil {
		return nil, err
	}
	u := &update{}
	seen := map[string]bool{}
	for p.peek().kind != 0 {
		t := p.next()
		kw := strings.ToUpper(t.text)
		if t.kind != 'i' || !slices.Contains([]string{"SET", "REMOVE", "ADD", "DELETE"}, kw) {
			return nil, syntaxError(p.kind, src, t.pos)
		}
		if seen[kw] {
			return nil, p.invalid(`The "` + kw + `" section can only be used once in an update expression;`)
		}
		seen[kw] = true
		for {
			pa, err := p.path()
			if err != nil {
				return nil, err
			}
			switch kw {
			case "SET":
				if err := p.expect("="); err != nil {
					return nil, err
				}
				v, err := p.setValue()
				if err != nil {
					return nil, err
				}
				u.set = append(u.set, setAction{pa, v})
			case "REMOVE":
				u.remove = append(u.remove, pa)
			default:
				if p.peek().kind != ':' {
					return nil, p.syntax()
				}
				v, err := p.valueRef()
				if err != nil {
					return nil, err
				}
				if kw == "ADD" {
					u.add = append(u.add, valueAction{pa, v})
				} else {
					u.del = append(u.del, valueAction{pa, v})
				}
			}
			if !p.isPunct(",") {
				break
			}
			p.next()
		}
	}
	ps := u.paths()
	for i, a := range ps {
		for _, b := range ps[:i] {
			if a.overlaps(b) {
				return nil, p.invalid("Two document paths overlap with each other; must remove or rewrite one of these paths; path one: [" + b.String() + "], path two: [" + a.String() + "]")
			}
		}
	}
	return u, nil
}

// setValue: operand, or operand + operand, or operand - operand.
func (p *parser) setValue() (operand, error) {
	a, err := p.setOperand()
	if err != nil {
		return nil, err
	}
	if p.isPunct("+") || p.isPunct("-") {
		op := p.next().text
		b, err := p.setOperand()
		if err != nil {
			return nil, err
		}
		return arithOp{op, a, b}, nil
	}
	return a, nil
}

func (p *parser) setOperand() (operand, error) {
	switch p.peek().kind {
	case ':':
		v, err := p.valueRef()
		return valueOp{v}, err
	case 'i':
		if name, ok := p.function(); ok {
			switch name {
			case "if_not_exists":
				pa, err := p.path()
				if err != nil {
					return nil, err
				}
				if err := p.expect(","); err != nil {
					return nil, err
				}
				alt, err := p.setOperand()
				if err != nil {
					return nil, err
				}
				return ifNotExistsOp{pa, alt}, p.expect(")")
			case "list_append":
				a, err := p.setOperand()
				if err != nil {
					return nil, err
				}
				if err := p.expect(","); err != nil {
					return nil, err
				}
				b, err := p.setOperand()
				if err != nil {
					return nil, err
				}
				return listAppendOp{a, b}, p.expect(")")
			case "attribute_exists", "attribute_not_exists", "attribute_type", "begins_with", "contains", "size":
				return nil, p.invalid("The function is not allowed in an update expression; function: " + name)
			default:
				return nil, p.invalid("Invalid function name; function: " + name)
			}
		}
	}
	pa, err := p.path()
	return pathOp{pa}, err
}

// apply runs the update on a copy of old (nil: no item) and returns the
// new item. Every value is read from old, as DynamoDB evaluates an update
// against the item as it was.
func (u *update) apply(old map[string]types.AttributeValue, key []string) (map[string]types.AttributeValue, error) {
	for _, p := range u.paths() {
		if slices.Contains(key, p[0].name) {
			return nil, itemError{validation("One or more parameter values were invalid: Cannot update attribute " + p[0].name + ". This attribute is part of the key")}
		}
	}
	if old == nil {
		old = map[string]types.AttributeValue{}
	}
	out := cloneItem(old)
	for _, a := range u.set {
		v, _, err := needed(a.v, old)
		if err != nil {
			return nil, err
		}
		if err := put(out, a.p, clone(v)); err != nil {
			return nil, err
		}
	}
	for _, p := range u.remove {
		if err := remove(out, p); err != nil {
			return nil, err
		}
	}
	for _, a := range u.add {
		if len(a.p) > 1 {
			return nil, unsupported("ADD on a nested attribute", a.p.String())
		}
		cur, ok := old[a.p[0].name]
		if !ok {
			switch a.v.(type) {
			case *types.AttributeValueMemberN, *types.AttributeValueMemberSS, *types.AttributeValueMemberNS, *types.AttributeValueMemberBS:
				out[a.p[0].name] = clone(a.v)
				continue
			}
			return nil, validation("Invalid UpdateExpression: Incorrect operand type for operator or function; operator: ADD, operand type: " + typeName(a.v))
		}
		v, err := addValues(cur, a.v)
		if err != nil {
			return nil, err
		}
		out[a.p[0].name] = v
	}
	for _, a := range u.del {
		if len(a.p) > 1 {
			return nil, unsupported("DELETE on a nested attribute", a.p.String())
		}
		switch a.v.(type) {
		case *types.AttributeValueMemberSS, *types.AttributeValueMemberNS, *types.AttributeValueMemberBS:
		default:
			return nil, validation("Invalid UpdateExpression: Incorrect operand type for operator or function; operator: DELETE, operand type: " + typeName(a.v))
		}
		cur, ok := old[a.p[0].name]
		if !ok {
			continue
		}
		v, err := deleteValues(cur, a.v)
		if err != nil {
			return nil, err
		}
		if v == nil {
			delete(out, a.p[0].name)
		} else {
			out[a.p[0].name] = v
		}
	}
	return out, nil
}

// itemError is a refusal DynamoDB reports, in a transaction, as the
// action's cancellation reason (ValidationError) rather than as a
// ValidationException of the whole request.
type itemError struct{ error }

func (e itemError) Unwrap() error { return e.error }

func typeMismatch(string, types.AttributeValue) error {
	return validation("An operand in the update expression has an incorrect data type")
}

func addValues(cur, v types.AttributeValue) (types.AttributeValue, error) {
	switch c := cur.(type) {
	case *types.AttributeValueMemberN:
		n, ok := v.(*types.AttributeValueMemberN)
		if !ok {
			return nil, typeMismatch("ADD", v)
		}
		x, _ := parseNumber(c.Value)
		y, _ := parseNumber(n.Value)
		r, err := x.add(y)
		if err != nil {
			return nil, err
		}
		return &types.AttributeValueMemberN{Value: r.String()}, nil
	case *types.AttributeValueMemberSS:
		s, ok := v.(*types.AttributeValueMemberSS)
		if !ok {
			return nil, typeMismatch("ADD", v)
		}
		out := slices.Clone(c.Value)
		for _, e := range s.Value {
			if !slices.Contains(out, e) {
				out = append(out, e)
			}
		}
		return &types.AttributeValueMemberSS{Value: out}, nil
	case *types.AttributeValueMemberNS:
		s, ok := v.(*types.AttributeValueMemberNS)
		if !ok {
			return nil, typeMismatch("ADD", v)
		}
		out := slices.Clone(c.Value)
		for _, e := range s.Value {
			if !numSetHas(out, e) {
				out = append(out, e)
			}
		}
		return putForm(&types.AttributeValueMemberNS{Value: out}), nil
	case *types.AttributeValueMemberBS:
		s, ok := v.(*types.AttributeValueMemberBS)
		if !ok {
			return nil, typeMismatch("ADD", v)
		}
		out := slices.Clone(c.Value)
		for _, e := range s.Value {
			if !binSetHas(out, e) {
				out = append(out, bytes.Clone(e))
			}
		}
		return &types.AttributeValueMemberBS{Value: out}, nil
	}
	return nil, typeMismatch("ADD", v)
}

// deleteValues removes v's elements from the set cur; nil when none remain.
func deleteValues(cur, v types.AttributeValue) (types.AttributeValue, error) {
	switch c := cur.(type) {
	case *types.AttributeValueMemberSS:
		s, ok := v.(*types.AttributeValueMemberSS)
		if !ok {
			return nil, typeMismatch("DELETE", v)
		}
		out := slices.DeleteFunc(slices.Clone(c.Value), func(e string) bool { return slices.Contains(s.Value, e) })
		if len(out) == 0 {
			return nil, nil
		}
		return &types.AttributeValueMemberSS{Value: out}, nil
	case *types.AttributeValueMemberNS:
		s, ok := v.(*types.AttributeValueMemberNS)
		if !ok {
			return nil, typeMismatch("DELETE", v)
		}
		out := slices.DeleteFunc(slices.Clone(c.Value), func(e string) bool { return numSetHas(s.Value, e) })
		if len(out) == 0 {
			return nil, nil
		}
		return putForm(&types.AttributeValueMemberNS{Value: out}), nil
	case *types.AttributeValueMemberBS:
		s, ok := v.(*types.AttributeValueMemberBS)
		if !ok {
			return nil, typeMismatch("DELETE", v)
		}
		out := slices.DeleteFunc(slices.Clone(c.Value), func(e []byte) bool { return binSetHas(s.Value, e) })
		if len(out) == 0 {
			return nil, nil
		}
		return &types.AttributeValueMemberBS{Value: out}, nil
	}
	return nil, typeMismatch("DELETE", v)
}

var errInvalidPath = validation("The document path provided in the update expression is invalid for update")

// put sets the value at p; the parent of a nested path must exist.
func put(item map[string]types.AttributeValue, p path, v types.AttributeValue) error {
	if len(p) == 1 {
		item[p[0].name] = v
		return nil
	}
	parent, ok := get(item, p[:len(p)-1])
	if !ok {
		return errInvalidPath
	}
	last := p[len(p)-1]
	switch c := parent.(type) {
	case *types.AttributeValueMemberM:
		if last.isIdx {
			return errInvalidPath
		}
		c.Value[last.name] = v
		return nil
	case *types.AttributeValueMemberL:
		if !last.isIdx {
			return errInvalidPath
		}
		if last.index >= len(c.Value) {
			c.Value = append(c.Value, v)
		} else {
			c.Value[last.index] = v
		}
		return nil
	}
	return errInvalidPath
}

// remove deletes the value at p, if any.
func remove(item map[string]types.AttributeValue, p path) error {
	if len(p) == 1 {
		delete(item, p[0].name)
		return nil
	}
	parent, ok := get(item, p[:len(p)-1])
	if !ok {
		return nil
	}
	last := p[len(p)-1]
	switch c := parent.(type) {
	case *types.AttributeValueMemberM:
		if !last.isIdx {
			delete(c.Value, last.name)
			return nil
		}
	case *types.AttributeValueMemberL:
		if last.isIdx {
			if last.index < len(c.Value) {
				c.Value = slices.Delete(c.Value, last.index, last.index+1)
			}
			return nil
		}
	}
	return errInvalidPath
}
