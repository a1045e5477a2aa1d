package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

// TestMain lets the test binary stand in for amkctl in end-to-end tests:
// with AMKCTL_AS_MAIN=1 it runs the command line and exits, and the
// scripts of testdata/script run it as the command "amkctl".
func TestMain(m *testing.M) {
	if os.Getenv("AMKCTL_AS_MAIN") == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	testscript.Main(m, map[string]func(){
		"amkctl": func() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) },
	})
}

// TestScripts runs the command-line scripts of testdata/script: each is a
// txtar archive of files and amkctl command lines with their expected
// output (github.com/rogpeppe/go-internal/testscript).
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:                 filepath.Join("testdata", "script"),
		RequireExplicitExec: true,
		Setup: func(env *testscript.Env) error {
			// Local mode, whatever the caller's environment says.
			env.Setenv(envServer, "")
			env.Setenv(envToken, "")
			env.Setenv("XDG_CONFIG_HOME", env.WorkDir)
			return nil
		},
	})
}

// runCmd runs amkctl in-process and returns exit code, stdout and stderr.
func runCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}
