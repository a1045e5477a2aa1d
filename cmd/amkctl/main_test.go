package main

import (
	"bytes"
	"os"
	"testing"
)

// TestMain lets the test binary stand in for amkctl in end-to-end tests:
// with AMKCTL_AS_MAIN=1 it runs the command line and exits.
func TestMain(m *testing.M) {
	if os.Getenv("AMKCTL_AS_MAIN") == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// runCmd runs amkctl in-process and returns exit code, stdout and stderr.
func runCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}
