package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/amk-dev/amk/inputfile"
	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/ir/mpk"
	"github.com/amk-dev/amk/programfile"
)

func init() {
	addVerb(groupFormats, newValidateCmd)
	addVerb(groupFormats, newIRCmd)
}

func newValidateCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "validate FILE... [--json]",
		Short: "statically prove program files safe (deadlock-, race-free, in bounds)",
		Long: `validate checks each program file ("-" reads standard input) and prints its
report: [VALID] or [REJECTED] with the stats, then one line per error and
warning; with several files each report starts with the file name. --json
prints the report object (several files: a JSON array of {file, report}).
A task_graph.json of Mirage's persistent kernel is recognised and checked in
MPK's terms ("MPK task graph: ..."; amkctl mpk check takes the launch's flags).
Any other file must be a program (an object with ir_version and tasks); a
file larger than --max-bytes, or a program with more tasks, buffers or
counters than --max-items, is refused before any work.
Exit status: 0 all valid, 1 some program rejected, 2 some file unreadable or
malformed.`,
	}
	asJSON := addJSONFlags(cmd, "print each report as JSON instead of text")
	lim := addProgramLimitFlags(cmd)
	cmd.RunE = runVerb(func(files []string, stdout, stderr io.Writer) int {
		if len(files) == 0 {
			fmt.Fprintln(stderr, "amkctl validate: at least one FILE is required (\"-\" reads standard input)")
			return exitBadInput
		}
		if lim.MaxBytes <= 0 || lim.MaxItems <= 0 {
			fmt.Fprintln(stderr, "amkctl validate: --max-bytes and --max-items must be positive")
			return exitBadInput
		}
		defer oneShotGC(*lim)()
		return validateFiles("validate", files, func(f string) (programfile.Checked, error) {
			c, err := programfile.Check(f, mpk.CheckOptions{}, *lim)
			return c, programError(err)
		}, *asJSON, stdout, stderr)
	})
	return cmd
}

// oneShotGC sets the collector for amkctl validate, one short pass whose
// heap stays live almost to the end: a file's bytes until they are decoded,
// the program until it is validated. A collection in between would find
// little to free and only mark the live program again (each collection of
// a 70B-shape program's heap costs several milliseconds of CPU, a tenth of
// the whole command), so the collector runs only when the heap reaches four
// times the largest file the command may read (256 MiB at least), which
// bounds the memory of many files checked in one call. GOGC or GOMEMLIMIT
// in the environment win. The returned func restores the settings (for
// the tests, which run the command in their own process).
func oneShotGC(lim ir.Limits) (restore func()) {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return func() {}
	}
	percent := debug.SetGCPercent(-1)
	limit := debug.SetMemoryLimit(max(256<<20, 4*lim.MaxBytes))
	return func() {
		debug.SetGCPercent(percent)
		debug.SetMemoryLimit(limit)
	}
}

// addProgramLimitFlags adds --max-bytes and --max-items, the bounds on a
// program file (ir.Limits; defaults far above the largest real program).
func addProgramLimitFlags(cmd *cobra.Command) *ir.Limits {
	lim := &ir.Limits{}
	cmd.Flags().Int64Var(&lim.MaxBytes, "max-bytes", ir.MaxProgramBytes, "largest program file read, in bytes (a 70B-shape program is about 18 MB)")
	cmd.Flags().IntVar(&lim.MaxItems, "max-items", ir.MaxProgramItems, "most tasks, buffers, counters or pages in one program")
	return lim
}

// validateFiles checks each file with check and prints the reports; verb
// names the command in its messages.
func validateFiles(verb string, files []string, check func(string) (programfile.Checked, error), asJSON bool, stdout, stderr io.Writer) int {
	type fileReport struct {
		File   string          `json:"file"`
		Report json.RawMessage `json:"report"`
	}
	var reports []fileReport
	status := exitOK
	for _, f := range files {
		checked, err := check(f)
		if err != nil {
			fmt.Fprintf(stderr, "amkctl %s: %s: %v\n", verb, f, err)
			status = exitBadInput
			continue
		}
		if !checked.OK && status == exitOK {
			status = exitRejected
		}
		switch {
		case asJSON:
			reports = append(reports, fileReport{File: f, Report: checked.JSON})
		case len(files) > 1:
			fmt.Fprintf(stdout, "%s: %s\n", f, checked.Text)
		default:
			fmt.Fprintln(stdout, checked.Text)
		}
	}
	switch {
	case asJSON && len(files) == 1 && len(reports) == 1:
		fmt.Fprintf(stdout, "%s\n", reports[0].Report)
	case asJSON && len(files) > 1:
		if reports == nil {
			reports = []fileReport{}
		}
		out, _ := json.MarshalIndent(reports, "", "  ")
		fmt.Fprintf(stdout, "%s\n", out)
	}
	return status
}

// newIRCmd is "ir", the program-file tools; today "ir roundtrip".
func newIRCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "ir roundtrip|recipes|patterns FILE",
		Short: "program files: re-encode canonically; fused tasks to and from the reference's (AMK's) recipes",
	}
	subcommandsOnly(cmd)
	roundtrip := &cobra.Command{
		Use:   "roundtrip FILE",
		Short: "decode a program file and write it re-encoded canonically to stdout",
		Long: `roundtrip decodes a program file ("-" reads standard input) and writes it
re-encoded to stdout in the reference's canonical form (json.dumps, indent 2,
no trailing newline), so a canonical file comes back byte for byte.
Exit status 2 on an unreadable or malformed file.`,
	}
	roundtrip.RunE = runVerb(func(files []string, stdout, stderr io.Writer) int {
		if len(files) != 1 {
			fmt.Fprintln(stderr, "amkctl ir roundtrip: exactly one FILE is required")
			return exitBadInput
		}
		p, err := loadProgram(files[0], ir.Limits{})
		if err != nil {
			fmt.Fprintf(stderr, "amkctl ir roundtrip: %s: %v\n", files[0], err)
			return exitBadInput
		}
		stdout.Write(ir.Encode(p)) // exactly the canonical bytes: no trailing newline, as to_json
		return exitOK
	})
	cmd.AddCommand(roundtrip, newIRConvertCmd("recipes", "write a program with the reference's (AMK's) params.recipe on every fused task it has one for",
		`recipes writes the program to stdout with every fused pattern task also carrying
the reference's params.recipe (its steps are the unfused ops the pattern stands
for, and the inputs they read), the form AMK's validator and CPU oracle take.
Each fused task without a recipe is named on stderr with the reason; exit 1
when there is one.`, ir.WithRecipes),
		newIRConvertCmd("patterns", "write a program with the reference's (AMK's) fused recipes read back as amk's fused patterns",
			`patterns writes the program to stdout with every FUSED task whose recipe is one
of amk's fused patterns turned into that pattern task (params.flags, the
pattern's inputs and params), the form amk's GPU kernels run. Each recipe that
is no pattern is named on stderr: the reference VM still runs it; exit 1 when
there is one.`, ir.WithPatterns))
	return cmd
}

// newIRConvertCmd is "ir NAME FILE": a program converted by convert,
// written canonically to stdout, with convert's notes on stderr.
func newIRConvertCmd(name, short, long string, convert func(*ir.Program) (*ir.Program, []ir.RecipeNote)) *cobra.Command {
	cmd := &cobra.Command{Use: name + " FILE", Short: short, Long: long}
	cmd.RunE = runVerb(func(files []string, stdout, stderr io.Writer) int {
		if len(files) != 1 {
			fmt.Fprintf(stderr, "amkctl ir %s: exactly one FILE is required\n", name)
			return exitBadInput
		}
		p, err := loadProgram(files[0], ir.Limits{})
		if err != nil {
			fmt.Fprintf(stderr, "amkctl ir %s: %s: %v\n", name, files[0], err)
			return exitBadInput
		}
		q, notes := convert(p)
		stdout.Write(ir.Encode(q))
		for _, n := range notes {
			fmt.Fprintf(stderr, "task %s: %s\n", n.Task, n.Reason)
		}
		if len(notes) > 0 {
			return exitRejected
		}
		return exitOK
	})
	return cmd
}

// loadProgram reads and decodes a program file within lim (zero fields:
// the defaults), its errors naming the flags of the limits.
func loadProgram(path string, lim ir.Limits) (*ir.Program, error) {
	p, err := programfile.Load(path, lim)
	return p, programError(err)
}

// programError names the flag of the limit a program file broke.
func programError(err error) error {
	var tooLarge *inputfile.TooLargeError
	switch {
	case errors.As(err, &tooLarge):
		return fmt.Errorf("%v (the --max-bytes limit; a 70B-shape program is about 18 MB)", err)
	case errors.Is(err, ir.ErrTooLarge):
		return fmt.Errorf("%v (raise --max-items or --max-bytes if the program is genuine)", err)
	}
	return err
}
