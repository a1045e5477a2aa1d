package deploytest

import (
	"fmt"
	"os"
	"testing"
)

// TestMain removes the daemons BuildCommands built once for all the tests.
func TestMain(m *testing.M) {
	code := m.Run()
	if err := RemoveBuilds(); err != nil {
		fmt.Fprintln(os.Stderr, "removing the built daemons:", err)
		code = max(code, 1)
	}
	os.Exit(code)
}
