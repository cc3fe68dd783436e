// Package compat holds the compatibility matrix of docs/compatibility.md:
// every feature with every store and every entry point, each cell either
// supported, with the test that runs it, or refused when the handler is
// built, with the named error.
//
// The matrix is a table in this package's test. TestCompatibility runs
// every supported cell on every store (the in-memory store always,
// DynamoDB Local and redis-server when the local stack is up, as under
// make test) and asserts every refusal; TestDocument checks that
// docs/compatibility.md is the table as it renders, and with -update
// writes it:
//
//	go test ./docs/compat -run TestDocument -update
package compat
