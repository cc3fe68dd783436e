// Package guides tests the guides in docs/ against what they describe.
//
// docs/getting-started.md shows the files of a consumer module,
// docs/getting-started/, verbatim (TestGuidesShowTheFiles), and
// TestGettingStartedBuildsAsSAMBuilds builds that module the way
// `sam build` does: a copy of exactly its CodeUri directory in an empty
// place, the Makefile's target run there, offline. TestLocalDevelopment
// runs the commands of docs/local-development.md against the local stack
// and checks that the guide's samples are what they print; run it with
// -update to write the samples of this run into the guide.
package guides
