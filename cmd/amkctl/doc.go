// Command amkctl is amk's command-line front end: validate and inspect
// programs, evaluate schedules, run embedded autoresearch campaigns, and drive
// campaigns (status, next, record, report, start, pause, ...) locally or on a
// scheduler. It is built on github.com/spf13/cobra, which gives every verb
// -h/--help, flag parsing with flags before, between or after the
// positional arguments, "did you mean" suggestions, --version, and shell
// completion (amkctl completion bash|zsh|fish).
//
// # Exit codes
//
// Every verb ends with one of the named codes of exitcodes.go, never a bare
// number: exitOK (0) success; exitRejected (1) the input was understood but
// the answer is no (a program rejected, a config incorrect, a command refused
// by the campaign, a remote error); exitBadInput (2) the command line or an
// input file is wrong (unknown verb or flag, missing argument, malformed
// JSON); exitInternal (3) a bug: amkctl prints one line "amkctl VERB:
// internal error: ..." and never a Go trace (runVerb recovers panics).
//
// # Adding a verb
//
// One verb is one file, named after the verb (fib.go for "amkctl fib"), that
// builds its *cobra.Command and registers the constructor from init, in
// one of the groups --help lists (main.go: groupCampaign, groupFleet,
// groupFormats, groupGPU):
//
//	func init() { addVerb(groupFormats, newFibCmd) }
//
//	func newFibCmd() *cobra.Command {
//		cmd := &cobra.Command{
//			Use:   "fib MODEL --gpu G [--json]",
//			Short: "one line for the verb list",
//			Long:  "optional paragraphs for amkctl fib --help",
//		}
//		fs := cmd.Flags()
//		gpu := addGPUFlag(cmd, "h100", "")           // shared flags: flags.go
//		jsonOut := addJSONFlags(cmd, "print JSON")   // --json and --output json|text
//		n := fs.Int("n", 10, "how many")
//		cmd.RunE = runVerb(func(args []string, stdout, stderr io.Writer) int {
//			if len(args) != 1 {
//				fmt.Fprintln(stderr, "amkctl fib: exactly one MODEL is required")
//				return exitBadInput
//			}
//			... call a package that does the work; print to stdout ...
//			return exitOK
//		})
//		return cmd
//	}
//
// The rules:
//   - the constructor is called afresh for every run (tests run many command
//     lines in one process), so flag values live in the constructor's
//     locals, never in package variables;
//   - the body gets the positional arguments (cobra has parsed the flags),
//     writes results to stdout and messages to stderr prefixed "amkctl VERB:",
//     and returns a named exit code; runVerb turns a nonzero code into the
//     process's exit status and a panic into one line and exitInternal;
//   - long flags only, spelled with two dashes; --json on every verb that can
//     print JSON (addJSONFlags also gives --output json|text); --gpu,
//     --device, --workspace and --schedule mean the same thing in every verb
//     (flags.go has the helpers); a renamed flag keeps its old name as an
//     alias with flagAliases;
//   - a verb that takes a MODEL sets ValidArgsFunction: completeModels, so
//     the shell completes the presets; --gpu and --device complete by
//     themselves;
//   - a verb that acts on one campaign starts from campaignVerb(use, short)
//     (campaigns.go), which adds the campaign selectors, --workspace, --json
//     and the remote flags, and runs its body with cf.onCampaign against a
//     control.Service: written once, it works on a local workspace and, with
//     --server, on a scheduler; the operation itself is control's (an
//     operator command is one line: see the note verb in lifecycle.go);
//   - a verb that can act on a scheduler calls addRemoteFlags(cmd) (remote.go):
//     that adds --server, --token and --token-file and lets
//     "amkctl --server URL VERB" put those flags before the verb;
//   - the work itself lives in a package (cmd/ only wires), and a
//     verb-specific test goes into VERB_test.go using runCmd (main_test.go),
//     which runs the whole command line in-process.
package main
