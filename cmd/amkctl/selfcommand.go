package main

import (
	"os"
	"path/filepath"
	"strings"
)

// selfCommand is how to run this amkctl again from the directory it was
// started in, for hints that print commands to type: "go run ./cmd/amkctl"
// under go run (whose binary lives in a temporary go-build directory), else
// the name it was started by (bin/amkctl, amkctl from PATH, a full path).
func selfCommand() string {
	arg0 := os.Args[0]
	sep := string(filepath.Separator)
	if strings.Contains(arg0, sep+"go-build") && strings.Contains(arg0, sep+"exe"+sep) {
		return "go run ./cmd/amkctl"
	}
	return shellQuote(arg0)
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/._-+=:,@%", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
