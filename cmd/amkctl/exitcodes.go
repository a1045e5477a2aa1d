package main

import "fmt"

// amkctl's exit codes (see doc.go and amkctl --help). Verbs return these,
// never bare numbers.
const (
	// exitOK: the verb did what was asked (a program valid, a config correct).
	exitOK = 0
	// exitRejected: the input was understood and the answer is no: a
	// program rejected, a config incorrect, a command refused, a remote error.
	exitRejected = 1
	// exitBadInput: the command line or an input file is wrong.
	exitBadInput = 2
	// exitInternal: a bug in amkctl, reported as one line.
	exitInternal = 3
)

// exitCodesHelp is the exit-code paragraph of amkctl --help.
const exitCodesHelp = `Exit codes:
  0  ok
  1  rejected or incorrect (a program rejected, a config incorrect, a command refused, a scheduler error)
  2  bad input (unknown command or flag, missing argument, unreadable or malformed file)
  3  internal error (a bug: one line on stderr, please report it with the command line)`

// exitStatus is the error a verb's RunE returns for a nonzero exit code;
// the verb has already told the user why.
type exitStatus int

func (e exitStatus) Error() string { return fmt.Sprintf("exit status %d", int(e)) }
