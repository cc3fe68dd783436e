package dynamotest

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/lambdaidem/go-lambdaidem/dynamo"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem/idemstore"
)

// Table names a table and its primary key.
type Table struct {
	Name string
	// HashKey is the partition key's attribute name (required).
	HashKey string
	// RangeKey is the sort key's attribute name ("" for none).
	RangeKey string
}

// DB is a set of in-memory DynamoDB tables. It is safe for concurrent use;
// each request applies atomically, as one DynamoDB request does.
type DB struct {
	mu     sync.Mutex
	tables map[string]*table
}

type table struct {
	Table
	items map[string]map[string]types.AttributeValue // by encoded key
}

// New returns a DB holding the given tables, empty. It panics on a table
// without a name or partition key, or named twice: a test's setup error.
func New(tables ...Table) *DB {
	d := &DB{tables: map[string]*table{}}
	for _, t := range tables {
		switch {
		case t.Name == "" || t.HashKey == "":
			panic(fmt.Sprintf("dynamotest: table %+v needs a Name and a HashKey", t))
		case t.HashKey == t.RangeKey:
			panic(fmt.Sprintf("dynamotest: table %s: the sort key must differ from the partition key", t.Name))
		case d.tables[t.Name] != nil:
			panic(fmt.Sprintf("dynamotest: table %s declared twice", t.Name))
		}
		d.tables[t.Name] = &table{Table: t, items: map[string]map[string]types.AttributeValue{}}
	}
	return d
}

// Items returns a copy of every item of a table, ordered by key (nil for
// a table that does not exist).
func (d *DB) Items(tableName string) []map[string]types.AttributeValue {
	d.mu.Lock()
	defer d.mu.Unlock()
	t := d.tables[tableName]
	if t == nil {
		return nil
	}
	keys := slices.Sorted(maps.Keys(t.items))
	out := make([]map[string]types.AttributeValue, len(keys))
	for i, k := range keys {
		out[i] = cloneItem(t.items[k])
	}
	return out
}

// Item returns a copy of the item with the given key, or nil.
func (d *DB) Item(tableName string, key map[string]types.AttributeValue) map[string]types.AttributeValue {
	d.mu.Lock()
	defer d.mu.Unlock()
	t := d.tables[tableName]
	if t == nil {
		return nil
	}
	k, _, err := t.keyOf(key, true)
	if err != nil {
		return nil
	}
	return cloneItem(t.items[k])
}

func (d *DB) table(name *string) (*table, error) {
	n := aws.ToString(name)
	t := d.tables[n]
	if t == nil {
		return nil, fmt.Errorf("%w: %q (declare it in dynamotest.New)", ErrNoTable, n)
	}
	return t, nil
}

func (t *table) keyNames() []string {
	if t.RangeKey == "" {
		return []string{t.HashKey}
	}
	return []string{t.HashKey, t.RangeKey}
}

// keyOf encodes the key attributes of m. exact requires m to hold the key
// attributes only (a Key parameter); otherwise m is an item.
func (t *table) keyOf(m map[string]types.AttributeValue, exact bool) (string, map[string]types.AttributeValue, error) {
	names := t.keyNames()
	if exact && len(m) != len(names) {
		return "", nil, validation("The provided key element does not match the schema")
	}
	var enc []string
	key := map[string]types.AttributeValue{}
	for _, n := range names {
		v, ok := m[n]
		if !ok {
			if exact {
				return "", nil, validation("The provided key element does not match the schema")
			}
			return "", nil, validation("One or more parameter values were invalid: Missing the key " + n + " in the item")
		}
		nv, err := normalize(v)
		if err != nil {
			return "", nil, err
		}
		var s string
		switch v := nv.(type) {
		case *types.AttributeValueMemberS:
			if v.Value == "" {
				return "", nil, validation("One or more parameter values are not valid. The AttributeValue for a key attribute cannot contain an empty string value. Key: " + n)
			}
			s = "S" + v.Value
		case *types.AttributeValueMemberN:
			d, _ := parseNumber(v.Value)
			s = "N" + d.String() // one item per value: 1 and 1.0 are one key
		case *types.AttributeValueMemberB:
			if len(v.Value) == 0 {
				return "", nil, validation("One or more parameter values are not valid. The AttributeValue for a key attribute cannot contain an empty binary value. Key: " + n)
			}
			s = "B" + base64.StdEncoding.EncodeToString(v.Value)
		default:
			return "", nil, validation("One or more parameter values were invalid: Type mismatch for key " + n)
		}
		enc = append(enc, fmt.Sprintf("%d:%s", len(s), s))
		key[n] = nv
	}
	return strings.Join(enc, ""), key, nil
}

// An action of a request: one Put, Update, Delete or ConditionCheck.
type action struct {
	t         *table
	key       string
	keyAttrs  map[string]types.AttributeValue
	put       map[string]types.AttributeValue // Put's item
	upd       *update
	del       bool
	touch     bool // an UpdateItem without an UpdateExpression
	cond      cond
	returnOld bool // ReturnValuesOnConditionCheckFailure ALL_OLD
}

type exprs struct {
	names  map[string]string
	values map[string]types.AttributeValue
	cond   *string
	update *string
}

func (d *DB) prepare(tableName *string, key, item map[string]types.AttributeValue, e exprs, rv types.ReturnValuesOnConditionCheckFailure) (*action, error) {
	t, err := d.table(tableName)
	if err != nil {
		return nil, err
	}
	a := &action{t: t}
	switch rv {
	case "", types.ReturnValuesOnConditionCheckFailureNone:
	case types.ReturnValuesOnConditionCheckFailureAllOld:
		a.returnOld = true
	default:
		return nil, validation("1 validation error detected: Value '" + string(rv) + "' at 'returnValuesOnConditionCheckFailure' failed to satisfy constraint")
	}
	if item != nil {
		a.key, a.keyAttrs, err = t.keyOf(item, false)
		if err != nil {
			return nil, err
		}
		a.put = map[string]types.AttributeValue{}
		for k, v := range item {
			n, err := normalize(v)
			if err != nil {
				return nil, err
			}
			a.put[k] = putForm(n)
		}
	} else {
		a.key, a.keyAttrs, err = t.keyOf(key, true)
		if err != nil {
			return nil, err
		}
	}
	if e.names != nil && len(e.names) == 0 {
		return nil, validation("ExpressionAttributeNames must not be empty")
	}
	if e.values != nil && len(e.values) == 0 {
		return nil, validation("ExpressionAttributeValues must not be empty")
	}
	if (e.names != nil || e.values != nil) && e.cond == nil && e.update == nil {
		return nil, validation("ExpressionAttributeNames and ExpressionAttributeValues can only be specified when using expressions")
	}
	en, err := newEnv(e.names, e.values)
	if err != nil {
		return nil, err
	}
	if e.update != nil {
		if a.upd, err = parseUpdate(*e.update, en); err != nil {
			return nil, err
		}
	}
	if e.cond != nil {
		if a.cond, err = parseCondition(*e.cond, en); err != nil {
			return nil, err
		}
	}
	if err := en.unused(); err != nil {
		return nil, err
	}
	return a, nil
}

// result is what the action leaves: the new item (nil: none), whether it
// changes the table, and an error DynamoDB reports for the item's data
// (an operand of the wrong type, say).
func (a *action) result(old map[string]types.AttributeValue) (map[string]types.AttributeValue, bool, error) {
	switch {
	case a.put != nil:
		return a.put, true, nil
	case a.del:
		return nil, true, nil
	case a.upd != nil:
		n, err := a.upd.apply(old, a.t.keyNames())
		if err != nil {
			return nil, false, err
		}
		maps.Copy(n, a.keyAttrs)
		return n, true, nil
	case a.touch:
		// An UpdateItem without an expression creates the item.
		n := cloneItem(old)
		if n == nil {
			n = map[string]types.AttributeValue{}
		}
		maps.Copy(n, a.keyAttrs)
		return n, true, nil
	}
	return old, false, nil // a ConditionCheck
}

var errConditionFailed = errors.New("The conditional request failed")

// run checks the action's condition and computes its result against the
// table as it is, without changing it.
func (a *action) run() (old, next map[string]types.AttributeValue, changes bool, err error) {
	old = a.t.items[a.key]
	if a.cond != nil && !a.cond.holds(orEmptyItem(old)) {
		return old, nil, false, errConditionFailed
	}
	next, changes, err = a.result(old)
	return old, next, changes, err
}

func orEmptyItem(it map[string]types.AttributeValue) map[string]types.AttributeValue {
	if it == nil {
		return map[string]types.AttributeValue{}
	}
	return it
}

func (a *action) commit(next map[string]types.AttributeValue) {
	if next == nil {
		delete(a.t.items, a.key)
		return
	}
	a.t.items[a.key] = next
}

func legacy(fields ...bool) error {
	if slices.Contains(fields, true) {
		return unsupported("the legacy parameters (Expected, AttributeUpdates, ConditionalOperator, ScanFilter)", "")
	}
	return nil
}

// PutItem puts an item as DynamoDB's PutItem does, with its
// ConditionExpression. A failed condition is a
// *types.ConditionalCheckFailedException, as the SDK returns it.
func (d *DB) PutItem(_ context.Context, in *dynamodb.PutItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	if err := legacy(in.Expected != nil, in.ConditionalOperator != ""); err != nil {
		return nil, err
	}
	if in.Item == nil {
		return nil, validation("1 validation error detected: Value null at 'item' failed to satisfy constraint: Member must not be null")
	}
	rv, err := returnValues(in.ReturnValues, types.ReturnValueAllOld)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	a, err := d.prepare(in.TableName, nil, in.Item, exprs{in.ExpressionAttributeNames, in.ExpressionAttributeValues, in.ConditionExpression, nil}, in.ReturnValuesOnConditionCheckFailure)
	if err != nil {
		return nil, err
	}
	old, err := d.single(a)
	if err != nil {
		return nil, err
	}
	out := &dynamodb.PutItemOutput{}
	if rv == types.ReturnValueAllOld {
		out.Attributes = cloneItem(old)
	}
	return out, nil
}

// UpdateItem updates (or creates) an item as DynamoDB's UpdateItem does.
func (d *DB) UpdateItem(_ context.Context, in *dynamodb.UpdateItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if err := legacy(in.Expected != nil, in.AttributeUpdates != nil, in.ConditionalOperator != ""); err != nil {
		return nil, err
	}
	rv, err := returnValues(in.ReturnValues, types.ReturnValueAllOld, types.ReturnValueAllNew)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	a, err := d.prepare(in.TableName, in.Key, nil, exprs{in.ExpressionAttributeNames, in.ExpressionAttributeValues, in.ConditionExpression, in.UpdateExpression}, in.ReturnValuesOnConditionCheckFailure)
	if err != nil {
		return nil, err
	}
	a.touch = in.UpdateExpression == nil
	old, err := d.single(a)
	if err != nil {
		return nil, err
	}
	out := &dynamodb.UpdateItemOutput{}
	switch rv {
	case types.ReturnValueAllOld:
		out.Attributes = cloneItem(old)
	case types.ReturnValueAllNew:
		out.Attributes = cloneItem(a.t.items[a.key])
	}
	return out, nil
}

// DeleteItem deletes an item as DynamoDB's DeleteItem does.
func (d *DB) DeleteItem(_ context.Context, in *dynamodb.DeleteItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	if err := legacy(in.Expected != nil, in.ConditionalOperator != ""); err != nil {
		return nil, err
	}
	rv, err := returnValues(in.ReturnValues, types.ReturnValueAllOld)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	a, err := d.prepare(in.TableName, in.Key, nil, exprs{in.ExpressionAttributeNames, in.ExpressionAttributeValues, in.ConditionExpression, nil}, in.ReturnValuesOnConditionCheckFailure)
	if err != nil {
		return nil, err
	}
	a.del = true
	old, err := d.single(a)
	if err != nil {
		return nil, err
	}
	out := &dynamodb.DeleteItemOutput{}
	if rv == types.ReturnValueAllOld {
		out.Attributes = cloneItem(old)
	}
	return out, nil
}

// GetItem reads an item (every attribute; projections are not
// interpreted).
func (d *DB) GetItem(_ context.Context, in *dynamodb.GetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	if in.ProjectionExpression != nil || in.AttributesToGet != nil {
		return nil, unsupported("a projection", aws.ToString(in.ProjectionExpression))
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	t, err := d.table(in.TableName)
	if err != nil {
		return nil, err
	}
	k, _, err := t.keyOf(in.Key, true)
	if err != nil {
		return nil, err
	}
	return &dynamodb.GetItemOutput{Item: cloneItem(t.items[k])}, nil
}

func returnValues(rv types.ReturnValue, allowed ...types.ReturnValue) (types.ReturnValue, error) {
	if rv == "" || rv == types.ReturnValueNone || slices.Contains(allowed, rv) {
		return rv, nil
	}
	return "", unsupported("ReturnValues "+string(rv), "")
}

// single runs one action; the caller holds the lock.
func (d *DB) single(a *action) (map[string]types.AttributeValue, error) {
	old, next, changes, err := a.run()
	switch {
	case errors.Is(err, errConditionFailed):
		e := &types.ConditionalCheckFailedException{Message: aws.String(err.Error())}
		if a.returnOld {
			e.Item = cloneItem(old)
		}
		return nil, e
	case err != nil:
		return nil, err
	}
	if changes {
		a.commit(next)
	}
	return old, nil
}

// TransactWriteItems applies the actions all or none, as DynamoDB's
// TransactWriteItems does: every condition is checked against the items
// as they were, and if any fails (or an action's data is refused) nothing
// applies and the answer is a *types.TransactionCanceledException with a
// reason per action. ClientRequestToken is not interpreted (a repeated
// request applies again).
func (d *DB) TransactWriteItems(_ context.Context, in *dynamodb.TransactWriteItemsInput, _ ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.transact(in.TransactItems, nil); err != nil {
		return nil, err
	}
	return &dynamodb.TransactWriteItemsOutput{}, nil
}

// transact runs a transaction; commit, when set, is called with the lock
// held just before the transaction applies.
func (d *DB) transact(items []types.TransactWriteItem, commit func()) error {
	if len(items) == 0 || len(items) > 100 {
		return validation(fmt.Sprintf("1 validation error detected: Value at 'transactItems' failed to satisfy constraint: Member must have length less than or equal to 100 and greater than or equal to 1 (%d)", len(items)))
	}
	actions := make([]*action, len(items))
	seen := map[string]bool{}
	for i, it := range items {
		a, err := d.prepareTx(it)
		if err != nil {
			return err
		}
		id := a.t.Name + "\x00" + a.key
		if seen[id] {
			return validation("Transaction request cannot include multiple operations on one item")
		}
		seen[id] = true
		actions[i] = a
	}
	reasons := make([]types.CancellationReason, len(actions))
	nexts := make([]map[string]types.AttributeValue, len(actions))
	changes := make([]bool, len(actions))
	canceled := false
	for i, a := range actions {
		old, next, ch, err := a.run()
		reasons[i] = types.CancellationReason{Code: aws.String("None")}
		switch {
		case errors.Is(err, errConditionFailed):
			canceled = true
			reasons[i] = types.CancellationReason{Code: aws.String("ConditionalCheckFailed"), Message: aws.String(err.Error())}
			if a.returnOld {
				reasons[i].Item = cloneItem(old)
			}
		case errors.As(err, new(itemError)):
			canceled = true
			reasons[i] = types.CancellationReason{Code: aws.String("ValidationError"), Message: aws.String(apiMessage(err))}
		case err != nil:
			// DynamoDB refuses the whole request for an action's data (an
			// operand of the wrong type), with a ValidationException.
			return err
		}
		nexts[i], changes[i] = next, ch
	}
	if canceled {
		codes := make([]string, len(reasons))
		for i, r := range reasons {
			codes[i] = aws.ToString(r.Code)
		}
		return &types.TransactionCanceledException{
			Message:             aws.String("Transaction cancelled, please refer cancellation reasons for specific reasons [" + strings.Join(codes, ", ") + "]"),
			CancellationReasons: reasons,
		}
	}
	if commit != nil {
		commit()
	}
	for i, a := range actions {
		if changes[i] {
			a.commit(nexts[i])
		}
	}
	return nil
}

func apiMessage(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorMessage()
	}
	return err.Error()
}

func (d *DB) prepareTx(it types.TransactWriteItem) (*action, error) {
	n := 0
	for _, set := range []bool{it.Put != nil, it.Update != nil, it.Delete != nil, it.ConditionCheck != nil} {
		if set {
			n++
		}
	}
	if n != 1 {
		return nil, validation("TransactItems can only contain one of Check, Put, Update or Delete")
	}
	switch {
	case it.Put != nil:
		p := it.Put
		if p.Item == nil {
			return nil, validation("1 validation error detected: Value null at 'transactItems.1.member.put.item' failed to satisfy constraint: Member must not be null")
		}
		return d.prepare(p.TableName, nil, p.Item, exprs{p.ExpressionAttributeNames, p.ExpressionAttributeValues, p.ConditionExpression, nil}, p.ReturnValuesOnConditionCheckFailure)
	case it.Update != nil:
		u := it.Update
		if u.UpdateExpression == nil {
			return nil, validation("1 validation error detected: Value null at 'transactItems.1.member.update.updateExpression' failed to satisfy constraint: Member must not be null")
		}
		return d.prepare(u.TableName, u.Key, nil, exprs{u.ExpressionAttributeNames, u.ExpressionAttributeValues, u.ConditionExpression, u.UpdateExpression}, u.ReturnValuesOnConditionCheckFailure)
	case it.Delete != nil:
		x := it.Delete
		a, err := d.prepare(x.TableName, x.Key, nil, exprs{x.ExpressionAttributeNames, x.ExpressionAttributeValues, x.ConditionExpression, nil}, x.ReturnValuesOnConditionCheckFailure)
		if a != nil {
			a.del = true
		}
		return a, err
	default:
		c := it.ConditionCheck
		if c.ConditionExpression == nil {
			return nil, validation("1 validation error detected: Value null at 'transactItems.1.member.conditionCheck.conditionExpression' failed to satisfy constraint: Member must not be null")
		}
		return d.prepare(c.TableName, c.Key, nil, exprs{c.ExpressionAttributeNames, c.ExpressionAttributeValues, c.ConditionExpression, nil}, c.ReturnValuesOnConditionCheckFailure)
	}
}

// WriteTypes lists what ApplyWrites commits: types.TransactWriteItem and
// a pointer to one.
func (d *DB) WriteTypes() []reflect.Type {
	return []reflect.Type{reflect.TypeFor[types.TransactWriteItem](), reflect.TypeFor[*types.TransactWriteItem]()}
}

// ApplyWrites commits a completion's writes (types.TransactWriteItem
// values, or pointers to them) as one DynamoDB transaction would, and
// calls commit, with the DB locked, just before they apply: a store that
// calls ApplyWrites under its own lock makes its completion and the writes
// one atomic step. Nothing applies and commit is not called when:
//   - a write's condition fails, or DynamoDB would refuse its data: a
//     *dynamo.TransactionError, which matches idemstore.ErrWriteRefused,
//     as the DynamoDB store reports a canceled transaction;
//   - the request is malformed (DynamoDB's ValidationException, or one of
//     its transaction limits): an error matching dynamo.ErrTransactionLimit;
//   - a write is not a types.TransactWriteItem, or uses what this package
//     does not interpret: an error matching idemstore.ErrUnsupportedWrite
//     (and ErrUnsupported, naming the construct);
//   - a table was not declared: ErrNoTable.
//
// It is what memstore.WithCompletionWrites takes.
func (d *DB) ApplyWrites(writes []any, commit func()) error {
	items := make([]types.TransactWriteItem, 0, len(writes))
	for i, w := range writes {
		switch w := w.(type) {
		case types.TransactWriteItem:
			items = append(items, w)
		case *types.TransactWriteItem:
			if w == nil {
				return fmt.Errorf("%w: write %d is a nil *types.TransactWriteItem", dynamo.ErrTransactionLimit, i)
			}
			items = append(items, *w)
		default:
			return fmt.Errorf("%w: write %d is a %T; dynamotest commits types.TransactWriteItem values", idemstore.ErrUnsupportedWrite, i, w)
		}
	}
	if len(items) >= 100 {
		return fmt.Errorf("%w: %d writes make %d actions with the completion, over DynamoDB's 100", dynamo.ErrTransactionLimit, len(items), len(items)+1)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	err := d.transact(items, commit)
	var tce *types.TransactionCanceledException
	switch {
	case err == nil:
		return nil
	case errors.As(err, &tce):
		te := &dynamo.TransactionError{}
		for i, r := range tce.CancellationReasons {
			if c := aws.ToString(r.Code); c != "None" {
				te.Failures = append(te.Failures, dynamo.WriteFailure{Index: i, Code: c, Message: aws.ToString(r.Message), Item: r.Item})
			}
		}
		return te
	case IsValidation(err):
		return fmt.Errorf("%w: %w", dynamo.ErrTransactionLimit, err)
	}
	return err
}
