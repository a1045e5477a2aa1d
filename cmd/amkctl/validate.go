package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/ir/mpk"
	"github.com/amk-dev/amk/validate"
)

func init() {
	addVerb(newValidateCmd)
	addVerb(newIRCmd)
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
Exit status: 0 all valid, 1 some program rejected, 2 some file unreadable or
malformed.`,
	}
	asJSON := addJSONFlags(cmd, "print each report as JSON instead of text")
	cmd.RunE = runVerb(func(files []string, stdout, stderr io.Writer) int {
		if len(files) == 0 {
			fmt.Fprintln(stderr, "amkctl validate: at least one FILE is required (\"-\" reads standard input)")
			return exitBadInput
		}
		return validateFiles(files, mpk.CheckOptions{}, *asJSON, stdout, stderr)
	})
	return cmd
}

// validateFiles validates program files and MPK task graphs (the latter
// for the launch mpkOpt describes).
func validateFiles(files []string, mpkOpt mpk.CheckOptions, asJSON bool, stdout, stderr io.Writer) int {
	type fileReport struct {
		File   string          `json:"file"`
		Report json.RawMessage `json:"report"`
	}
	var reports []fileReport
	status := exitOK
	for _, f := range files {
		text, raw, ok, err := validateFile(f, mpkOpt)
		if err != nil {
			fmt.Fprintf(stderr, "amkctl validate: %s: %v\n", f, err)
			status = exitBadInput
			continue
		}
		if !ok && status == exitOK {
			status = exitRejected
		}
		switch {
		case asJSON:
			reports = append(reports, fileReport{File: f, Report: raw})
		case len(files) > 1:
			fmt.Fprintf(stdout, "%s: %s\n", f, text)
		default:
			fmt.Fprintln(stdout, text)
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

// validateFile checks one file: an MPK task graph (recognised by its
// all_tasks key) or an amk program.
func validateFile(f string, mpkOpt mpk.CheckOptions) (text string, raw json.RawMessage, ok bool, err error) {
	data, err := readInput(f, ir.MaxProgramBytes)
	if err != nil {
		return "", nil, false, err
	}
	if mpk.Looks(data) {
		return checkMPK(data, mpkOpt)
	}
	p, err := ir.Decode(data)
	if err != nil {
		return "", nil, false, err
	}
	rep := validate.Validate(p)
	return rep.String(), rep.JSON(), rep.OK, nil
}

// newIRCmd is "ir", the program-file tools; today "ir roundtrip".
func newIRCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "ir roundtrip FILE",
		Short: "program files: ir roundtrip FILE decodes and re-encodes canonically",
	}
	cmd.RunE = runVerb(func(args []string, _, stderr io.Writer) int {
		if len(args) == 0 {
			fmt.Fprintln(stderr, "amkctl ir: a subcommand is required: amkctl ir roundtrip FILE")
		} else {
			fmt.Fprintf(stderr, "amkctl ir: unknown subcommand %q: amkctl ir roundtrip FILE\n", args[0])
		}
		return exitBadInput
	})
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
		p, err := loadProgram(files[0])
		if err != nil {
			fmt.Fprintf(stderr, "amkctl ir roundtrip: %s: %v\n", files[0], err)
			return exitBadInput
		}
		stdout.Write(ir.Encode(p)) // exactly the canonical bytes: no trailing newline, as to_json
		return exitOK
	})
	cmd.AddCommand(roundtrip)
	return cmd
}

// loadProgram reads and decodes a program file; errors name the JSON path
// (ir.DecodeError) or the byte offset (a syntax error).
func loadProgram(path string) (*ir.Program, error) {
	data, err := readInput(path, ir.MaxProgramBytes)
	if err != nil {
		return nil, err
	}
	return ir.Decode(data)
}
