// Package dynamotest is an in-memory stand-in for the DynamoDB tables a
// handler writes its effects to, for tests that run without DynamoDB (the
// test kit lambdaidemtest, an in-memory store).
//
// A [DB] holds tables declared with their keys. It applies the writes a
// transactional handler adds with lambdaidem.AddCompletionWrite
// (types.TransactWriteItem: Put, Update, Delete, ConditionCheck) all or
// none, as one TransactWriteItems would, and answers the SDK client's
// PutItem, UpdateItem, DeleteItem, GetItem and TransactWriteItems with the
// same results and errors, so a handler written against an interface of
// those methods runs on either. [DB.ApplyWrites] is what
// memstore.WithCompletionWrites takes: the in-memory store then commits a
// completion and its writes in one step, fenced by the lease like the
// DynamoDB store's transaction.
//
// It interprets the part of DynamoDB's expression language handlers use:
// ConditionExpression (comparisons, BETWEEN, IN, AND, OR, NOT,
// parentheses, attribute_exists, attribute_not_exists, attribute_type,
// begins_with, contains, size), UpdateExpression (SET with + and -,
// if_not_exists and list_append; REMOVE; ADD to numbers and sets; DELETE
// from sets), document paths (a.b, a[0]), ExpressionAttributeNames and
// ExpressionAttributeValues, with DynamoDB's refusals: reserved words,
// unused or undefined placeholders, overlapping paths, updates of key
// attributes, operands of the wrong type, numbers beyond 38 digits, two
// actions on one item. Its tests apply the same requests to DynamoDB
// Local and compare what each refused and what each stored. Anything else
// (legacy parameters, projections, ReturnValues UPDATED_*, ADD or DELETE
// on nested attributes) is refused with [ErrUnsupported], naming it.
//
//	db := dynamotest.New(dynamotest.Table{Name: "ledger", HashKey: "order"})
//	store := memstore.New(memstore.WithCompletionWrites(db))
//	// ... run the handler on store; then:
//	entries := db.Items("ledger")
//
// Numbers compare by value and keep the form DynamoDB Local gives them: a
// put stores top-level numbers and number sets without trailing zeros
// ("1.50" as "1.5"), an update's SET keeps the form written, and
// arithmetic keeps the larger scale of its operands (1.50 + 1.50 is
// "3.00"). Real DynamoDB may differ in form, never in value; compare
// numbers by value in tests.
//
// Not interpreted: capacity, item size and throughput limits, indexes,
// queries and scans, TTL, streams, ClientRequestToken.
package dynamotest
