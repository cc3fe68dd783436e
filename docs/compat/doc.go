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
//
// A new feature is one element of features (features_test.go): its name,
// how a handler turns it on, whether it is for SQS or for Wrap and
// httpidem only (with the option those refuse and the named error), run,
// which exercises it through any entry point on any store and fails
// without it, kit, which runs it in a lambdaidemtest.Kit (nil when the
// kit refuses it, as the SQS handler does), and the simulator's knobs
// that draw it. A refusal that depends on the store goes in cellOf
// (matrix_test.go). Then write the page with -update.
package compat
