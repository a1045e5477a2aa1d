// Command amkctl is amk's command-line front end: validate and inspect
// programs, evaluate schedules, run embedded autoresearch campaigns, and drive
// campaigns (status, next, record, report) locally or on a scheduler.
package main

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// command is one amkctl verb. Each verb lives in its own file and registers
// itself from init, so verbs are added without touching this file.
type command struct {
	name    string
	summary string
	// run executes the verb; its return value is the process exit code.
	run func(args []string, stdout, stderr io.Writer) int
}

var commands = map[string]command{}

func register(c command) {
	if _, dup := commands[c.name]; dup {
		panic("amkctl: duplicate command " + c.name)
	}
	commands[c.name] = c
}

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	args, err := hoistGlobalFlags(args)
	if err != nil {
		fmt.Fprintln(stderr, "amkctl:", err)
		return 2
	}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stdout)
		return 0
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "amkctl: unknown command %q\n\n", args[0])
		usage(stderr)
		return 2
	}
	return runGuarded(c, args[1:], stdout, stderr)
}

// runGuarded runs a verb so that an internal error reaches the user as one
// clear line and exit code 3, never as a Go panic trace.
func runGuarded(c command, args []string, stdout, stderr io.Writer) (code int) {
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(stderr, "amkctl %s: internal error: %v (please report it with the command line)\n", c.name, r)
			code = 3
		}
	}()
	return c.run(args, stdout, stderr)
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: amkctl [--server URL [--token T | --token-file F]] <command> [arguments]  (amkctl <command> -h for help)")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "commands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	width := 0
	for _, n := range names {
		width = max(width, len(n))
	}
	for _, n := range names {
		fmt.Fprintf(w, "  %s%s  %s\n", n, strings.Repeat(" ", width-len(n)), commands[n].summary)
	}
}
