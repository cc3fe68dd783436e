// Package snippets holds the README's code examples as complete programs,
// one directory each, so that `go vet ./...` compiles every one of them and
// TestREADMESnippets checks that the README shows them exactly as they are
// here. Edit the file, then copy it into the README block that names it.
// The user module of lambdaidemtest's README section is checked the same
// way, from lambdaidemtest/testdata/usermodule.
package snippets
