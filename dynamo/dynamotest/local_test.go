package dynamotest_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambdaidem/go-lambdaidem/dynamo/dynamotest"
	"github.com/lambdaidem/go-lambdaidem/internal/testenv"
)

// Shorthands for the cases.
type (
	av   = types.AttributeValue
	item = map[string]types.AttributeValue
)

func s(v string) av     { return &types.AttributeValueMemberS{Value: v} }
func n(v string) av     { return &types.AttributeValueMemberN{Value: v} }
func b(v string) av     { return &types.AttributeValueMemberB{Value: []byte(v)} }
func ss(v ...string) av { return &types.AttributeValueMemberSS{Value: v} }
func ns(v ...string) av { return &types.AttributeValueMemberNS{Value: v} }
func l(v ...av) av      { return &types.AttributeValueMemberL{Value: v} }
func m(v item) av       { return &types.AttributeValueMemberM{Value: v} }
func boolean(v bool) av { return &types.AttributeValueMemberBOOL{Value: v} }

// The two tables every case may use: a ledger keyed by account and entry,
// and balances keyed by account alone.
var schema = []dynamotest.Table{
	{Name: "ledger", HashKey: "account", RangeKey: "entry"},
	{Name: "balances", HashKey: "account"},
}

func entry(acct, e string) item { return item{"account": s(acct), "entry": s(e)} }
func balance(acct string) item  { return item{"account": s(acct)} }
func with(base item, kv ...any) item {
	out := maps.Clone(base)
	for i := 0; i < len(kv); i += 2 {
		out[kv[i].(string)] = kv[i+1].(av)
	}
	return out
}

func put(table string, it item, cond string, names map[string]string, values item) types.TransactWriteItem {
	p := &types.Put{TableName: aws.String(table), Item: it, ExpressionAttributeNames: names, ExpressionAttributeValues: values}
	if cond != "" {
		p.ConditionExpression = aws.String(cond)
	}
	return types.TransactWriteItem{Put: p}
}

func upd(table string, key item, update, cond string, names map[string]string, values item) types.TransactWriteItem {
	u := &types.Update{TableName: aws.String(table), Key: key, UpdateExpression: aws.String(update), ExpressionAttributeNames: names, ExpressionAttributeValues: values}
	if cond != "" {
		u.ConditionExpression = aws.String(cond)
	}
	return types.TransactWriteItem{Update: u}
}

func del(table string, key item, cond string, names map[string]string, values item) types.TransactWriteItem {
	d := &types.Delete{TableName: aws.String(table), Key: key, ExpressionAttributeNames: names, ExpressionAttributeValues: values}
	if cond != "" {
		d.ConditionExpression = aws.String(cond)
	}
	return types.TransactWriteItem{Delete: d}
}

func check(table string, key item, cond string, names map[string]string, values item) types.TransactWriteItem {
	return types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{TableName: aws.String(table), Key: key, ConditionExpression: aws.String(cond), ExpressionAttributeNames: names, ExpressionAttributeValues: values}}
}

func allOld(w types.TransactWriteItem) types.TransactWriteItem {
	const o = types.ReturnValuesOnConditionCheckFailureAllOld
	switch {
	case w.Put != nil:
		w.Put.ReturnValuesOnConditionCheckFailure = o
	case w.Update != nil:
		w.Update.ReturnValuesOnConditionCheckFailure = o
	case w.Delete != nil:
		w.Delete.ReturnValuesOnConditionCheckFailure = o
	case w.ConditionCheck != nil:
		w.ConditionCheck.ReturnValuesOnConditionCheckFailure = o
	}
	return w
}

func vals(kv ...any) item {
	out := item{}
	for i := 0; i < len(kv); i += 2 {
		out[kv[i].(string)] = kv[i+1].(av)
	}
	return out
}

func names(kv ...string) map[string]string {
	out := map[string]string{}
	for i := 0; i < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}

// A case puts its items unconditionally, then applies its writes as one
// transaction (and, when it has one write, as that single request too).
type localCase struct {
	name   string
	before []item // ledger items have an "entry", balances items do not
	tx     []types.TransactWriteItem
}

var (
	acct  = balance("a1")
	acct2 = balance("a2")
	e1    = entry("a1", "e1")
	rich  = with(acct, "amount", n("100"), "status", s("open"), "tags", ss("x", "y"), "nums", ns("1", "2"),
		"list", l(s("p"), n("2")), "doc", m(item{"k": s("v"), "inner": m(item{"z": n("1")})}), "name", s("héllo"), "bin", b("abc"), "flag", boolean(true))
)

var localCases = []localCase{
	// Conditions of a put: the idempotent ledger entry.
	{"put if absent, absent", nil, []types.TransactWriteItem{put("ledger", with(e1, "amount", n("5")), "attribute_not_exists(account)", nil, nil)}},
	{"put if absent, present", []item{with(e1, "amount", n("1"))}, []types.TransactWriteItem{put("ledger", with(e1, "amount", n("5")), "attribute_not_exists(account)", nil, nil)}},
	{"put if absent, present, all old", []item{with(e1, "amount", n("1"))}, []types.TransactWriteItem{allOld(put("ledger", with(e1, "amount", n("5")), "attribute_not_exists(entry)", nil, nil))}},
	{"put if exists, absent", nil, []types.TransactWriteItem{put("ledger", e1, "attribute_exists(account)", nil, nil)}},
	{"put replaces every attribute", []item{with(e1, "old", s("x"))}, []types.TransactWriteItem{put("ledger", with(e1, "amount", n("5")), "", nil, nil)}},
	// Comparisons.
	{"number comparison across forms", []item{with(acct, "amount", n("10"))}, []types.TransactWriteItem{check("balances", acct, "amount >= :v", nil, vals(":v", n("10.00")))}},
	{"number comparison fails", []item{with(acct, "amount", n("10"))}, []types.TransactWriteItem{check("balances", acct, "amount > :v", nil, vals(":v", n("1e1")))}},
	{"string order", []item{rich}, []types.TransactWriteItem{check("balances", acct, "#s < :v", names("#s", "status"), vals(":v", s("opf")))}},
	{"binary order", []item{rich}, []types.TransactWriteItem{check("balances", acct, "bin <= :v", nil, vals(":v", b("abc")))}},
	{"equal on a missing attribute", []item{acct}, []types.TransactWriteItem{check("balances", acct, "missing = :v", nil, vals(":v", s("x")))}},
	{"not equal on a missing attribute", []item{acct}, []types.TransactWriteItem{check("balances", acct, "missing <> :v", nil, vals(":v", s("x")))}},
	{"not equal across types", []item{rich}, []types.TransactWriteItem{check("balances", acct, "amount <> :v", nil, vals(":v", s("100")))}},
	{"equal across types", []item{rich}, []types.TransactWriteItem{check("balances", acct, "amount = :v", nil, vals(":v", s("100")))}},
	{"less across types", []item{rich}, []types.TransactWriteItem{check("balances", acct, "amount < :v", nil, vals(":v", s("200")))}},
	{"condition on an absent item", nil, []types.TransactWriteItem{check("balances", acct, "amount < :v", nil, vals(":v", n("200")))}},
	{"set equality ignores order", []item{rich}, []types.TransactWriteItem{check("balances", acct, "tags = :v AND nums = :w", nil, vals(":v", ss("y", "x"), ":w", ns("2", "1.0")))}},
	{"list and map equality", []item{rich}, []types.TransactWriteItem{check("balances", acct, "#l = :v AND doc = :w", names("#l", "list"), vals(":v", l(s("p"), n("2")), ":w", m(item{"k": s("v"), "inner": m(item{"z": n("1")})})))}},
	{"between", []item{rich}, []types.TransactWriteItem{check("balances", acct, "amount BETWEEN :lo AND :hi", nil, vals(":lo", n("100"), ":hi", n("200")))}},
	{"between inverted bounds", []item{rich}, []types.TransactWriteItem{check("balances", acct, "amount BETWEEN :lo AND :hi", nil, vals(":lo", n("200"), ":hi", n("100")))}},
	{"in", []item{rich}, []types.TransactWriteItem{check("balances", acct, "#s IN (:a, :b)", names("#s", "status"), vals(":a", s("closed"), ":b", s("open")))}},
	{"not in", []item{rich}, []types.TransactWriteItem{check("balances", acct, "NOT #s IN (:a)", names("#s", "status"), vals(":a", s("open")))}},
	// Logic and precedence.
	{"not binds tighter than and", []item{rich}, []types.TransactWriteItem{check("balances", acct, "NOT amount = :x AND flag = :t", nil, vals(":x", n("1"), ":t", boolean(true)))}},
	{"and binds tighter than or", []item{rich}, []types.TransactWriteItem{check("balances", acct, "amount = :x OR amount = :y AND flag = :f", nil, vals(":x", n("100"), ":y", n("1"), ":f", boolean(false)))}},
	{"parentheses", []item{rich}, []types.TransactWriteItem{check("balances", acct, "(amount = :x OR amount = :y) AND flag = :f", nil, vals(":x", n("100"), ":y", n("1"), ":f", boolean(false)))}},
	{"keywords in lower case", []item{rich}, []types.TransactWriteItem{check("balances", acct, "amount = :x and not flag = :f or amount between :x and :x", nil, vals(":x", n("100"), ":f", boolean(true)))}},
	// Functions.
	{"begins_with", []item{rich}, []types.TransactWriteItem{check("balances", acct, "begins_with(#s, :p)", names("#s", "status"), vals(":p", s("op")))}},
	{"begins_with on a number attribute", []item{rich}, []types.TransactWriteItem{check("balances", acct, "begins_with(amount, :p)", nil, vals(":p", s("1")))}},
	{"begins_with a number", []item{rich}, []types.TransactWriteItem{check("balances", acct, "begins_with(amount, :p)", nil, vals(":p", n("1")))}},
	{"contains in a string set", []item{rich}, []types.TransactWriteItem{check("balances", acct, "contains(tags, :v)", nil, vals(":v", s("y")))}},
	{"contains in a number set", []item{rich}, []types.TransactWriteItem{check("balances", acct, "contains(nums, :v)", nil, vals(":v", n("2.0")))}},
	{"contains in a string", []item{rich}, []types.TransactWriteItem{check("balances", acct, "contains(#n, :v)", names("#n", "name"), vals(":v", s("éll")))}},
	{"contains in a list", []item{rich}, []types.TransactWriteItem{check("balances", acct, "contains(#l, :v)", names("#l", "list"), vals(":v", n("2")))}},
	{"size of a string counts characters", []item{rich}, []types.TransactWriteItem{check("balances", acct, "size(#n) = :v", names("#n", "name"), vals(":v", n("5")))}},
	{"size of a string is not its bytes", []item{rich}, []types.TransactWriteItem{check("balances", acct, "size(#n) = :v", names("#n", "name"), vals(":v", n("6")))}},
	{"size of a set, list and map", []item{rich}, []types.TransactWriteItem{check("balances", acct, "size(tags) = :two AND size(#l) = :two AND size(doc) = :two AND size(bin) = :three", names("#l", "list"), vals(":two", n("2"), ":three", n("3")))}},
	{"size of a number", []item{rich}, []types.TransactWriteItem{check("balances", acct, "size(amount) >= :z", nil, vals(":z", n("0")))}},
	{"size of a missing attribute", []item{rich}, []types.TransactWriteItem{check("balances", acct, "size(missing) < :z", nil, vals(":z", n("1")))}},
	{"attribute_type", []item{rich}, []types.TransactWriteItem{check("balances", acct, "attribute_type(tags, :ss) AND attribute_type(amount, :n)", nil, vals(":ss", s("SS"), ":n", s("N")))}},
	{"attribute_type with a bad type", []item{rich}, []types.TransactWriteItem{check("balances", acct, "attribute_type(tags, :t)", nil, vals(":t", s("STRING")))}},
	{"nested paths", []item{rich}, []types.TransactWriteItem{check("balances", acct, "doc.k = :v AND doc.inner.z = :one AND #l[1] = :two AND attribute_not_exists(doc.nope)", names("#l", "list"), vals(":v", s("v"), ":one", n("1"), ":two", n("2")))}},
	{"ordering a boolean value", []item{rich}, []types.TransactWriteItem{check("balances", acct, "flag < :t", nil, vals(":t", boolean(true)))}},
	{"ordering a list value", []item{rich}, []types.TransactWriteItem{check("balances", acct, "#l > :v", names("#l", "list"), vals(":v", l(s("p"))))}},
	{"equality with null", []item{with(acct, "z", &types.AttributeValueMemberNULL{Value: true})}, []types.TransactWriteItem{check("balances", acct, "z = :n", nil, vals(":n", &types.AttributeValueMemberNULL{Value: true}))}},
	{"contains a number in a string", []item{rich}, []types.TransactWriteItem{check("balances", acct, "contains(#n, :v)", names("#n", "name"), vals(":v", n("1")))}},
	{"begins_with on binary", []item{rich}, []types.TransactWriteItem{check("balances", acct, "begins_with(bin, :p)", nil, vals(":p", b("ab")))}},
	{"in with one value repeated", []item{rich}, []types.TransactWriteItem{check("balances", acct, "amount IN (:a, :a, :b)", nil, vals(":a", n("1"), ":b", n("100.0")))}},
	{"size in an update", []item{rich}, []types.TransactWriteItem{upd("balances", acct, "SET a = size(tags)", "", nil, nil)}},
	{"a condition function in an update", []item{rich}, []types.TransactWriteItem{upd("balances", acct, "SET a = attribute_exists(tags)", "", nil, nil)}},
	{"if_not_exists in a condition", []item{rich}, []types.TransactWriteItem{check("balances", acct, "if_not_exists(amount, :v) = :v", nil, vals(":v", n("1")))}},
	{"set a list element", []item{rich}, []types.TransactWriteItem{upd("balances", acct, "SET #l[0] = :v, #l[5] = :w", "", names("#l", "list"), vals(":v", s("q"), ":w", s("end")))}},
	{"remove a list element", []item{rich}, []types.TransactWriteItem{upd("balances", acct, "REMOVE #l[0], #l[9]", "", names("#l", "list"), nil)}},
	{"nested names through placeholders", []item{rich}, []types.TransactWriteItem{upd("balances", acct, "SET #d.#i.#z = :v", "#d.#i.#z = :one", names("#d", "doc", "#i", "inner", "#z", "z"), vals(":v", n("9"), ":one", n("1")))}},
	{"three operands", []item{rich}, []types.TransactWriteItem{upd("balances", acct, "SET amount = amount + :a + :a", "", nil, vals(":a", n("1")))}},
	{"a placeholder used twice", []item{rich}, []types.TransactWriteItem{upd("balances", acct, "SET amount = amount - :a", "amount >= :a", nil, vals(":a", n("1")))}},
	// Names and values.
	{"reserved word", []item{rich}, []types.TransactWriteItem{check("balances", acct, "status = :v", nil, vals(":v", s("open")))}},
	{"reserved word in upper case", []item{rich}, []types.TransactWriteItem{check("balances", acct, "STATUS = :v", nil, vals(":v", s("open")))}},
	{"unused value", []item{rich}, []types.TransactWriteItem{check("balances", acct, "amount = :v", nil, vals(":v", n("100"), ":w", n("1")))}},
	{"unused name", []item{rich}, []types.TransactWriteItem{check("balances", acct, "amount = :v", names("#x", "x"), vals(":v", n("100")))}},
	{"undefined value", []item{rich}, []types.TransactWriteItem{check("balances", acct, "amount = :w", nil, vals(":v", n("100")))}},
	{"undefined name", []item{rich}, []types.TransactWriteItem{check("balances", acct, "#x = :v", nil, vals(":v", n("100")))}},
	{"syntax error", []item{rich}, []types.TransactWriteItem{check("balances", acct, "amount = = :v", nil, vals(":v", n("100")))}},
	{"unknown function", []item{rich}, []types.TransactWriteItem{check("balances", acct, "exists(amount)", nil, nil)}},
	// Updates: arithmetic, if_not_exists, ADD, REMOVE, DELETE.
	{"add to a balance", []item{with(acct, "amount", n("10"))}, []types.TransactWriteItem{upd("balances", acct, "SET amount = amount + :d", "", nil, vals(":d", n("2.5")))}},
	{"subtract below zero", []item{with(acct, "amount", n("1"))}, []types.TransactWriteItem{upd("balances", acct, "SET amount = amount - :d", "", nil, vals(":d", n("2.5")))}},
	{"debit with a guard", []item{with(acct, "amount", n("1"))}, []types.TransactWriteItem{upd("balances", acct, "SET amount = amount - :d", "amount >= :d", nil, vals(":d", n("2")))}},
	{"if_not_exists creates the item", nil, []types.TransactWriteItem{upd("balances", acct, "SET amount = if_not_exists(amount, :z) + :d", "", nil, vals(":z", n("0"), ":d", n("7")))}},
	{"if_not_exists keeps a value", []item{with(acct, "amount", n("3"))}, []types.TransactWriteItem{upd("balances", acct, "SET amount = if_not_exists(amount, :z) + :d", "", nil, vals(":z", n("0"), ":d", n("7")))}},
	{"arithmetic on a missing attribute", []item{acct}, []types.TransactWriteItem{upd("balances", acct, "SET amount = amount + :d", "", nil, vals(":d", n("1")))}},
	{"arithmetic on a string", []item{rich}, []types.TransactWriteItem{upd("balances", acct, "SET amount = #s + :d", "", names("#s", "status"), vals(":d", n("1")))}},
	{"values read from the old item", []item{rich}, []types.TransactWriteItem{upd("balances", acct, "SET amount = :z, copy = amount", "", nil, vals(":z", n("0")))}},
	{"number forms are normalized", nil, []types.TransactWriteItem{upd("balances", acct, "SET a = :a, b = :b, c = :c, d = :d, e = :e, f = :f", "", nil, vals(":a", n("1.50"), ":b", n("1e2"), ":c", n("-0"), ":d", n("007"), ":e", n("0.000100"), ":f", n("-12.3400e-2")))}},
	{"a put keeps numbers in canonical form", nil, []types.TransactWriteItem{put("balances", with(acct, "a", n("1e2"), "b", n("-0"), "c", n("007"), "d", n("0.000100"), "e", n("-12.3400e-2"), "f", n("1.23e30"), "g", n("1e-20"), "s", ns("1e2", "0.50"), "m", m(item{"k": n("1.50")}), "l", l(n("3.10"))), "", nil, nil)}},
	{"set operations keep numbers in canonical form", []item{with(acct, "s", ns("1", "2"))}, []types.TransactWriteItem{upd("balances", acct, "ADD s :s, c :c DELETE t :t", "", nil, vals(":s", ns("3.0"), ":c", n("1.0"), ":t", ns("1")))}},
	{"a delete from a number set", []item{with(acct, "s", ns("1", "2.50", "3"))}, []types.TransactWriteItem{upd("balances", acct, "DELETE s :t", "", nil, vals(":t", ns("3.0")))}},
	{"too many digits", nil, []types.TransactWriteItem{upd("balances", acct, "SET a = :a", "", nil, vals(":a", n("123456789012345678901234567890123456789")))}},
	{"add to a missing number", []item{acct}, []types.TransactWriteItem{upd("balances", acct, "ADD hits :one", "", nil, vals(":one", n("1")))}},
	{"add to a number and a set", []item{rich}, []types.TransactWriteItem{upd("balances", acct, "ADD amount :one, tags :t", "", nil, vals(":one", n("-1"), ":t", ss("y", "z")))}},
	{"add a string", []item{rich}, []types.TransactWriteItem{upd("balances", acct, "ADD tags :t", "", nil, vals(":t", s("z")))}},
	{"add a number to a set", []item{rich}, []types.TransactWriteItem{upd("balances", acct, "ADD tags :t", "", nil, vals(":t", n("1")))}},
	{"remove", []item{rich}, []types.TransactWriteItem{upd("balances", acct, "REMOVE amount, missing, doc.k", "", nil, nil)}},
	{"delete from a set", []item{rich}, []types.TransactWriteItem{upd("balances", acct, "DELETE tags :t, nums :n", "", nil, vals(":t", ss("x", "q"), ":n", ns("1", "2")))}},
	{"delete from a missing set", []item{acct}, []types.TransactWriteItem{upd("balances", acct, "DELETE tags :t", "", nil, vals(":t", ss("x")))}},
	{"set, remove and add in one", []item{rich}, []types.TransactWriteItem{upd("balances", acct, "SET #s = :c REMOVE flag ADD amount :one", "", names("#s", "status"), vals(":c", s("closed"), ":one", n("1")))}},
	{"sections in any order", []item{rich}, []types.TransactWriteItem{upd("balances", acct, "add amount :one set #s = :c", "", names("#s", "status"), vals(":c", s("closed"), ":one", n("1")))}},
	{"a section twice", []item{rich}, []types.TransactWriteItem{upd("balances", acct, "SET a = :one SET b = :one", "", nil, vals(":one", n("1")))}},
	{"overlapping paths", []item{rich}, []types.TransactWriteItem{upd("balances", acct, "SET doc.k = :one REMOVE doc", "", nil, vals(":one", n("1")))}},
	{"the same path twice", []item{rich}, []types.TransactWriteItem{upd("balances", acct, "SET a = :one, a = :one", "", nil, vals(":one", n("1")))}},
	{"update a key attribute", []item{rich}, []types.TransactWriteItem{upd("balances", acct, "SET account = :v", "", nil, vals(":v", s("a9")))}},
	{"list_append", []item{rich}, []types.TransactWriteItem{upd("balances", acct, "SET #l = list_append(#l, :more)", "", names("#l", "list"), vals(":more", l(boolean(false))))}},
	{"nested set", []item{rich}, []types.TransactWriteItem{upd("balances", acct, "SET doc.inner.z = doc.inner.z + :one, doc.added = :one", "", nil, vals(":one", n("1")))}},
	{"nested set under a missing map", []item{acct}, []types.TransactWriteItem{upd("balances", acct, "SET doc.k = :one", "", nil, vals(":one", n("1")))}},
	{"remove on an absent item", nil, []types.TransactWriteItem{upd("balances", acct, "REMOVE amount", "", nil, nil)}},
	{"empty string and empty set", nil, []types.TransactWriteItem{upd("balances", acct, "SET e = :e", "", nil, vals(":e", s("")))}},
	{"an empty set is refused", nil, []types.TransactWriteItem{upd("balances", acct, "SET e = :e", "", nil, vals(":e", ss()))}},
	{"update with a condition on the old item", []item{with(acct, "version", n("3"))}, []types.TransactWriteItem{upd("balances", acct, "SET version = :next", "version = :prev", nil, vals(":prev", n("3"), ":next", n("4")))}},
	// Deletes and keys.
	{"delete with a condition", []item{with(e1, "amount", n("5"))}, []types.TransactWriteItem{del("ledger", e1, "amount = :v", nil, vals(":v", n("5")))}},
	{"delete refused", []item{with(e1, "amount", n("5"))}, []types.TransactWriteItem{allOld(del("ledger", e1, "amount = :v", nil, vals(":v", n("6"))))}},
	{"delete an absent item", nil, []types.TransactWriteItem{del("ledger", e1, "", nil, nil)}},
	{"a key without its sort key", nil, []types.TransactWriteItem{del("ledger", balance("a1"), "", nil, nil)}},
	{"a key with an extra attribute", nil, []types.TransactWriteItem{del("balances", with(acct, "x", s("y")), "", nil, nil)}},
	{"a put without its key", nil, []types.TransactWriteItem{put("ledger", balance("a1"), "", nil, nil)}},
	{"an empty key value", nil, []types.TransactWriteItem{put("balances", balance(""), "", nil, nil)}},
	// Transactions: all or nothing.
	{"transfer", []item{with(acct, "amount", n("10")), with(acct2, "amount", n("0"))}, []types.TransactWriteItem{
		upd("balances", acct, "SET amount = amount - :d", "amount >= :d", nil, vals(":d", n("4"))),
		upd("balances", acct2, "SET amount = amount + :d", "", nil, vals(":d", n("4"))),
		put("ledger", with(e1, "amount", n("4")), "attribute_not_exists(entry)", nil, nil),
	}},
	{"transfer refused by one condition", []item{with(acct, "amount", n("10")), with(acct2, "amount", n("0")), e1}, []types.TransactWriteItem{
		upd("balances", acct, "SET amount = amount - :d", "amount >= :d", nil, vals(":d", n("4"))),
		upd("balances", acct2, "SET amount = amount + :d", "", nil, vals(":d", n("4"))),
		allOld(put("ledger", with(e1, "amount", n("4")), "attribute_not_exists(entry)", nil, nil)),
	}},
	{"refused by a condition check", []item{with(acct, "frozen", boolean(true))}, []types.TransactWriteItem{
		check("balances", acct, "attribute_not_exists(frozen)", nil, nil),
		put("ledger", e1, "", nil, nil),
	}},
	{"two refusals", []item{with(acct, "amount", n("1")), e1}, []types.TransactWriteItem{
		upd("balances", acct, "SET amount = amount - :d", "amount >= :d", nil, vals(":d", n("4"))),
		put("ledger", e1, "attribute_not_exists(entry)", nil, nil),
	}},
	{"a data error among writes", []item{with(acct, "amount", s("x"))}, []types.TransactWriteItem{
		upd("balances", acct, "SET amount = amount + :d", "", nil, vals(":d", n("4"))),
		put("ledger", e1, "", nil, nil),
	}},
	{"a data error and a refused condition", []item{with(acct, "amount", s("x")), e1}, []types.TransactWriteItem{
		put("ledger", e1, "attribute_not_exists(entry)", nil, nil),
		upd("balances", acct, "SET amount = amount + :d", "", nil, vals(":d", n("4"))),
	}},
	{"a data error under a refused condition", []item{with(acct, "amount", s("x"))}, []types.TransactWriteItem{
		upd("balances", acct, "SET amount = amount + :d", "attribute_not_exists(account)", nil, vals(":d", n("4"))),
	}},
	{"arithmetic keeps the exact sum", []item{with(acct, "amount", n("0.1"))}, []types.TransactWriteItem{upd("balances", acct, "SET amount = amount + :d, b = :d - amount, c = :big + :d", "", nil, vals(":d", n("0.20"), ":big", n("99999999999999999999999999999999999999")))}},
	{"arithmetic results' form", []item{with(acct, "amount", n("1.50"))}, []types.TransactWriteItem{upd("balances", acct, "SET amount = amount + :d, b = :e + :d, c = :d - :d", "", nil, vals(":d", n("1.50"), ":e", n("1e2")))}},
	{"a number key matches by value", []item{}, []types.TransactWriteItem{put("ledger", with(e1, "n", n("1")), "", nil, nil)}},
	{"two writes on one item", nil, []types.TransactWriteItem{
		put("ledger", e1, "", nil, nil),
		del("ledger", e1, "", nil, nil),
	}},
}

// outcome is what a request did, in words both implementations share.
type outcome struct {
	err     string // "" applied, "canceled [codes]", "conditional check failed", "validation"
	oldItem string // the item a refusal returned (ALL_OLD)
	items   string // the touched items afterwards
}

func show(v av) string {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return fmt.Sprintf("S%q", v.Value)
	case *types.AttributeValueMemberN:
		return "N" + v.Value
	case *types.AttributeValueMemberB:
		return fmt.Sprintf("B%q", v.Value)
	case *types.AttributeValueMemberBOOL:
		return fmt.Sprint(v.Value)
	case *types.AttributeValueMemberNULL:
		return "NULL"
	case *types.AttributeValueMemberSS:
		return "SS" + fmt.Sprint(slices.Sorted(slices.Values(v.Value)))
	case *types.AttributeValueMemberNS:
		return "NS" + fmt.Sprint(slices.Sorted(slices.Values(v.Value)))
	case *types.AttributeValueMemberBS:
		var out []string
		for _, e := range v.Value {
			out = append(out, string(e))
		}
		sort.Strings(out)
		return "BS" + fmt.Sprint(out)
	case *types.AttributeValueMemberL:
		var out []string
		for _, e := range v.Value {
			out = append(out, show(e))
		}
		return "[" + strings.Join(out, " ") + "]"
	case *types.AttributeValueMemberM:
		return showItem(v.Value)
	case nil:
		return "<nil>"
	}
	return fmt.Sprintf("%T", v)
}

func showItem(it item) string {
	if it == nil {
		return "none"
	}
	var out []string
	for _, k := range slices.Sorted(maps.Keys(it)) {
		out = append(out, k+":"+show(it[k]))
	}
	return "{" + strings.Join(out, " ") + "}"
}

func describe(err error) (string, string) {
	var tce *types.TransactionCanceledException
	var ccf *types.ConditionalCheckFailedException
	switch {
	case err == nil:
		return "", ""
	case errors.As(err, &tce):
		var codes, olds []string
		for _, r := range tce.CancellationReasons {
			codes = append(codes, aws.ToString(r.Code))
			olds = append(olds, showItem(r.Item))
		}
		return "canceled " + fmt.Sprint(codes), strings.Join(olds, " ")
	case errors.As(err, &ccf):
		return "conditional check failed", showItem(ccf.Item)
	case dynamotest.IsValidation(err):
		return "validation", ""
	}
	return "error " + err.Error(), ""
}

// client is the part of the SDK client both implementations offer.
type client interface {
	PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(context.Context, *dynamodb.UpdateItemInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	DeleteItem(context.Context, *dynamodb.DeleteItemInput, ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	TransactWriteItems(context.Context, *dynamodb.TransactWriteItemsInput, ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
}

var (
	_ client = (*dynamodb.Client)(nil)
	_ client = (*dynamotest.DB)(nil)
)

// target is one implementation with its table names.
type target struct {
	c      client
	tables map[string]string // the cases' names to the implementation's
}

func (tg target) rename(w types.TransactWriteItem) types.TransactWriteItem {
	r := func(p **string) {
		v := aws.String(tg.tables[aws.ToString(*p)])
		*p = v
	}
	switch {
	case w.Put != nil:
		c := *w.Put
		r(&c.TableName)
		w.Put = &c
	case w.Update != nil:
		c := *w.Update
		r(&c.TableName)
		w.Update = &c
	case w.Delete != nil:
		c := *w.Delete
		r(&c.TableName)
		w.Delete = &c
	case w.ConditionCheck != nil:
		c := *w.ConditionCheck
		r(&c.TableName)
		w.ConditionCheck = &c
	}
	return w
}

func tableOf(it item) string {
	if _, ok := it["entry"]; ok {
		return "ledger"
	}
	return "balances"
}

func keyOf(table string, it item) item {
	k := item{"account": it["account"]}
	if table == "ledger" {
		k["entry"] = it["entry"]
	}
	return k
}

// touched lists the (table, key) pairs a case reads or writes.
func (c localCase) touched() [][2]any {
	var out [][2]any
	addKey := func(table string, k item) {
		for _, v := range k {
			if v == nil {
				return
			}
		}
		for _, o := range out {
			if o[0] == table && showItem(o[1].(item)) == showItem(k) {
				return
			}
		}
		out = append(out, [2]any{table, k})
	}
	for _, it := range c.before {
		addKey(tableOf(it), keyOf(tableOf(it), it))
	}
	for _, w := range c.tx {
		switch {
		case w.Put != nil:
			if _, ok := w.Put.Item["account"]; ok {
				t := aws.ToString(w.Put.TableName)
				addKey(t, keyOf(t, w.Put.Item))
			}
		case w.Update != nil:
			addKey(aws.ToString(w.Update.TableName), w.Update.Key)
		case w.Delete != nil:
			addKey(aws.ToString(w.Delete.TableName), w.Delete.Key)
		case w.ConditionCheck != nil:
			addKey(aws.ToString(w.ConditionCheck.TableName), w.ConditionCheck.Key)
		}
	}
	return out
}

// run applies the case on tg (as a transaction, or as the single request
// when single is set) and returns the outcome; it leaves the touched items
// deleted.
func (tg target) run(t *testing.T, c localCase, single bool) outcome {
	ctx := context.Background()
	cleanup := func() {
		for _, k := range c.touched() {
			key := k[1].(item)
			if showItem(key) == showItem(keyOf(k[0].(string), key)) && key["account"].(*types.AttributeValueMemberS).Value != "" {
				if _, err := tg.c.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(tg.tables[k[0].(string)]), Key: key}); err != nil {
					t.Fatalf("cleanup: %v", err)
				}
			}
		}
	}
	cleanup()
	for _, it := range c.before {
		if _, err := tg.c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(tg.tables[tableOf(it)]), Item: it}); err != nil {
			t.Fatalf("put %s: %v", showItem(it), err)
		}
	}
	var err error
	if single {
		err = tg.single(ctx, tg.rename(c.tx[0]))
	} else {
		tx := make([]types.TransactWriteItem, len(c.tx))
		for i, w := range c.tx {
			tx[i] = tg.rename(w)
		}
		_, err = tg.c.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: tx})
	}
	var o outcome
	o.err, o.oldItem = describe(err)
	var after []string
	for _, k := range c.touched() {
		key := k[1].(item)
		out, err := tg.c.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(tg.tables[k[0].(string)]), Key: key, ConsistentRead: aws.Bool(true)})
		if err != nil {
			after = append(after, "unreadable")
			continue
		}
		after = append(after, showItem(out.Item))
	}
	o.items = strings.Join(after, " ")
	cleanup()
	return o
}

func (tg target) single(ctx context.Context, w types.TransactWriteItem) error {
	var err error
	switch {
	case w.Put != nil:
		p := w.Put
		_, err = tg.c.PutItem(ctx, &dynamodb.PutItemInput{TableName: p.TableName, Item: p.Item, ConditionExpression: p.ConditionExpression,
			ExpressionAttributeNames: p.ExpressionAttributeNames, ExpressionAttributeValues: p.ExpressionAttributeValues, ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailure(p.ReturnValuesOnConditionCheckFailure)})
	case w.Update != nil:
		u := w.Update
		_, err = tg.c.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: u.TableName, Key: u.Key, UpdateExpression: u.UpdateExpression, ConditionExpression: u.ConditionExpression,
			ExpressionAttributeNames: u.ExpressionAttributeNames, ExpressionAttributeValues: u.ExpressionAttributeValues, ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailure(u.ReturnValuesOnConditionCheckFailure)})
	case w.Delete != nil:
		x := w.Delete
		_, err = tg.c.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: x.TableName, Key: x.Key, ConditionExpression: x.ConditionExpression,
			ExpressionAttributeNames: x.ExpressionAttributeNames, ExpressionAttributeValues: x.ExpressionAttributeValues, ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailure(x.ReturnValuesOnConditionCheckFailure)})
	default:
		return nil
	}
	return err
}

// localTables creates the schema's tables on DynamoDB Local.
func localTables(t *testing.T) target {
	t.Helper()
	c := testenv.DynamoDB(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	tg := target{c: c, tables: map[string]string{}}
	for _, tb := range schema {
		name := testenv.Name("dynamotest-" + tb.Name)
		in := &dynamodb.CreateTableInput{
			TableName:   aws.String(name),
			BillingMode: types.BillingModePayPerRequest,
			AttributeDefinitions: []types.AttributeDefinition{
				{AttributeName: aws.String(tb.HashKey), AttributeType: types.ScalarAttributeTypeS},
			},
			KeySchema: []types.KeySchemaElement{{AttributeName: aws.String(tb.HashKey), KeyType: types.KeyTypeHash}},
		}
		if tb.RangeKey != "" {
			in.AttributeDefinitions = append(in.AttributeDefinitions, types.AttributeDefinition{AttributeName: aws.String(tb.RangeKey), AttributeType: types.ScalarAttributeTypeS})
			in.KeySchema = append(in.KeySchema, types.KeySchemaElement{AttributeName: aws.String(tb.RangeKey), KeyType: types.KeyTypeRange})
		}
		if _, err := c.CreateTable(ctx, in); err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
		t.Cleanup(func() {
			_, _ = c.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(name)})
		})
		tg.tables[tb.Name] = name
	}
	for _, name := range tg.tables {
		w := dynamodb.NewTableExistsWaiter(c, func(o *dynamodb.TableExistsWaiterOptions) { o.MinDelay = 20 * time.Millisecond })
		if err := w.Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)}, time.Minute); err != nil {
			t.Fatalf("table %s: %v", name, err)
		}
	}
	return tg
}

func memTables() target {
	tg := target{c: dynamotest.New(schema...), tables: map[string]string{}}
	for _, tb := range schema {
		tg.tables[tb.Name] = tb.Name
	}
	return tg
}

// TestSameAsDynamoDBLocal applies every case to DynamoDB Local and to the
// interpreter and compares what each refused and what each left: that is
// how the interpreter's semantics are known to be DynamoDB's.
func TestSameAsDynamoDBLocal(t *testing.T) {
	local, mem := localTables(t), memTables()
	for _, c := range localCases {
		t.Run(c.name, func(t *testing.T) {
			for _, single := range []bool{false, true} {
				if single && len(c.tx) != 1 {
					continue
				}
				want := local.run(t, c, single)
				got := mem.run(t, c, single)
				if got != want {
					t.Errorf("single=%v:\nDynamoDB Local: %+v\ninterpreter:    %+v", single, want, got)
				}
			}
		})
	}
}

// What the single requests return (ReturnValues ALL_OLD and ALL_NEW) is
// what DynamoDB Local returns.
func TestReturnValuesLikeDynamoDBLocal(t *testing.T) {
	local, mem := localTables(t), memTables()
	ctx := context.Background()
	run := func(tg target) []string {
		var out []string
		table := aws.String(tg.tables["balances"])
		_, _ = tg.c.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: table, Key: acct})
		p, err := tg.c.PutItem(ctx, &dynamodb.PutItemInput{TableName: table, Item: with(acct, "amount", n("1.50")), ReturnValues: types.ReturnValueAllOld})
		out = append(out, fmt.Sprint(err), showItem(p.Attributes))
		p, err = tg.c.PutItem(ctx, &dynamodb.PutItemInput{TableName: table, Item: with(acct, "amount", n("2")), ReturnValues: types.ReturnValueAllOld})
		out = append(out, fmt.Sprint(err), showItem(p.Attributes))
		for _, rv := range []types.ReturnValue{types.ReturnValueAllOld, types.ReturnValueAllNew, types.ReturnValueNone} {
			u, err := tg.c.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: table, Key: acct, ReturnValues: rv,
				UpdateExpression: aws.String("SET amount = amount + :d ADD hits :one"), ExpressionAttributeValues: vals(":d", n("0.25"), ":one", n("1"))})
			out = append(out, fmt.Sprint(err), showItem(u.Attributes))
		}
		d, err := tg.c.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: table, Key: acct, ReturnValues: types.ReturnValueAllOld})
		out = append(out, fmt.Sprint(err), showItem(d.Attributes))
		return out
	}
	want, got := run(local), run(mem)
	if !slices.Equal(got, want) {
		t.Errorf("DynamoDB Local: %q\ninterpreter:    %q", want, got)
	}
}
