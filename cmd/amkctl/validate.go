package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/validate"
)

func init() {
	register(command{name: "validate", summary: "statically prove program files safe (deadlock-, race-free, in bounds)", run: runValidate})
	register(command{name: "ir", summary: "program files: ir roundtrip FILE decodes and re-encodes canonically", run: runIR})
}

// Exit codes of validate and ir.
const (
	exitValid    = 0
	exitRejected = 1
	exitBadInput = 2
)

func runValidate(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("validate", "validate FILE... [--json]", stderr)
	asJSON := fs.Bool("json", false, "print each report as JSON instead of text")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: amkctl validate FILE... [--json]")
		fmt.Fprintln(stderr, "\nValidates each program file (\"-\" reads standard input) and prints its report:")
		fmt.Fprintln(stderr, "[VALID] or [REJECTED] with the stats, then one line per error and warning; with")
		fmt.Fprintln(stderr, "several files each report starts with the file name. --json prints the report")
		fmt.Fprintln(stderr, "object (several files: a JSON array of {file, report}).")
		fmt.Fprintln(stderr, "Exit status: 0 all valid, 1 some program rejected, 2 some file unreadable or malformed.")
		fmt.Fprintln(stderr, "\nflags:")
		fs.PrintDefaults()
	}
	files, err := parseArgs(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if len(files) == 0 {
		fs.Usage()
		return exitBadInput
	}
	type fileReport struct {
		File   string          `json:"file"`
		Report json.RawMessage `json:"report"`
	}
	var reports []fileReport
	status := exitValid
	for _, f := range files {
		p, err := loadProgram(f)
		if err != nil {
			fmt.Fprintf(stderr, "amkctl validate: %s: %v\n", f, err)
			status = exitBadInput
			continue
		}
		rep := validate.Validate(p)
		if !rep.OK && status == exitValid {
			status = exitRejected
		}
		switch {
		case *asJSON:
			reports = append(reports, fileReport{File: f, Report: rep.JSON()})
		case len(files) > 1:
			fmt.Fprintf(stdout, "%s: %s\n", f, rep.String())
		default:
			fmt.Fprintln(stdout, rep.String())
		}
	}
	switch {
	case *asJSON && len(files) == 1 && len(reports) == 1:
		fmt.Fprintf(stdout, "%s\n", reports[0].Report)
	case *asJSON && len(files) > 1:
		if reports == nil {
			reports = []fileReport{}
		}
		out, _ := json.MarshalIndent(reports, "", "  ")
		fmt.Fprintf(stdout, "%s\n", out)
	}
	return status
}

func runIR(args []string, stdout, stderr io.Writer) int {
	usage := func(w io.Writer) {
		fmt.Fprintln(w, "usage: amkctl ir roundtrip FILE")
		fmt.Fprintln(w, "\nroundtrip decodes a program file (\"-\" reads standard input) and writes it")
		fmt.Fprintln(w, "re-encoded to stdout in the reference's canonical form (json.dumps, indent 2,")
		fmt.Fprintln(w, "no trailing newline), so a canonical file comes back byte for byte.")
		fmt.Fprintln(w, "Exit status 2 on an unreadable or malformed file.")
	}
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
		usage(stdout)
		return exitValid
	}
	if len(args) == 0 || args[0] != "roundtrip" {
		usage(stderr)
		return exitBadInput
	}
	fs := newFlagSet("ir roundtrip", "ir roundtrip FILE", stderr)
	fs.Usage = func() { usage(stderr) }
	files, err := parseArgs(fs, args[1:])
	if err != nil {
		return flagExit(err)
	}
	if len(files) != 1 {
		usage(stderr)
		return exitBadInput
	}
	p, err := loadProgram(files[0])
	if err != nil {
		fmt.Fprintf(stderr, "amkctl ir roundtrip: %s: %v\n", files[0], err)
		return exitBadInput
	}
	stdout.Write(ir.Encode(p)) // exactly the canonical bytes: no trailing newline, as to_json
	return exitValid
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
