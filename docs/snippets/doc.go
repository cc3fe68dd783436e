// Package snippets holds the Go examples of README.md and docs/*.md as
// complete programs, one directory each, so that `go vet ./...` compiles
// every one of them, and checks the documents themselves:
//
//   - TestSnippets: every Go block of a document names the file it shows
//     (<!-- snippet: PATH --> on the line before it) and is that file,
//     verbatim; every program here is shown somewhere. Edit the file, then
//     copy it into the block that names it. The user module of
//     docs/testing.md (lambdaidemtest/testdata/usermodule) is checked the
//     same way.
//   - TestLinks: every relative link of a document points at a file or
//     directory of the repository, and every #fragment at a heading of the
//     Markdown file it names.
package snippets
