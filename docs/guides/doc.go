// Package guides tests the guides in docs/ against what they describe.
//
// docs/getting-started is what `lambdaidem new` writes
// (TestGettingStartedIsGenerated), and docs/getting-started.md shows its
// files verbatim (TestGuidesShowTheFiles). TestGettingStartedBuildsAsSAMBuilds
// builds that module the way `sam build` does: a copy of exactly its
// CodeUri directory in an empty place, the Makefile's target run there,
// offline. TestNewModule generates a module for each store and runs its
// make test, cfn-lint on its template, and its make local against the
// local stack. TestLocalDevelopment runs the commands of
// docs/local-development.md against the local stack and checks that the
// guide's samples are what they print. Run the tests with -update to write
// what this run made into the docs: the generated module, the samples.
package guides
