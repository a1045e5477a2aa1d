package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/amk-dev/amk/calibrate"
	"github.com/amk-dev/amk/inputfile"
	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/schedule"
)

func init() { addVerb(groupGPU, newCalibrateCmd) }

// defaultCostsFile is the cost records' data file, relative to the
// repository root (schedule embeds it).
const defaultCostsFile = "schedule/costs.json"

func newCalibrateCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "calibrate VERDICT.json|DIR|trials.jsonl... --gpu G [--fit P,...] [--json] [--write] [--costs-file F] [--date YYYY-MM-DD]",
		Short: "fit a target's cost record (schedule/costs.json) to measured-gpu verdicts; print it and predicted vs measured",
		Long: `calibrate reads verdicts as amkctl eval --device cuda writes them (files, or
directories whose *.json files are all verdicts) and campaigns' trials logs
(a file named *.jsonl, such as campaigns/ID/trials.jsonl of amkctl
autoresearch --device cuda: its measured, correct trials are used, the
others skipped), lowers each verdict's
program again from its model_spec, point, pos and batch, and fits the
target's cost record to the measured latencies: the quantities of --fit
(default achievable_bw, max_sm_stream_gbs, hop, tile_fixed_us; also
hbm_latency_us, staging_us, epilogue_us) minimise the squared log error of
the cost model's prediction against the measurement (package calibrate
says how). A quantity the points cannot identify stays at its default and
is reported as kept.

Every verdict file must be valid, correct (a correctness PASS), measured-gpu
and of the target; one that is not refuses the lot (exit 2), each named with
its reason.

Output: a markdown report (the parameters, and for every point the measured
latency, the predictions before (the defaults) and after, and their errors)
with the data file to commit; --json prints the data file only; --write
writes it to --costs-file (default schedule/costs.json, run from the
repository root), keeping the other targets' records. Exit 1, and nothing
written, when the fit predicts the points worse than the defaults.`,
	}
	cmd.Long += "\n\nQuantities --fit knows:\n"
	for _, p := range calibrate.FitParams {
		cmd.Long += fmt.Sprintf("  %-18s %s (fitted within [%g, %g])\n", p.Name, p.Help, p.Lo, p.Hi)
	}
	gpu := addGPUFlag(cmd, "h100", "the GPU target record the verdicts measured (--target is another name)")
	flagAliases(cmd.Flags(), map[string]string{"target": "gpu"})
	jsonOut := addJSONFlags(cmd, "print the data file (JSON) only")
	flags := cmd.Flags()
	fit := flags.StringSlice("fit", nil, "quantities to fit, comma-separated (default "+strings.Join(calibrate.DefaultFit, ",")+")")
	write := flags.Bool("write", false, "write the data file to --costs-file")
	costsFile := flags.String("costs-file", defaultCostsFile, "the cost records' data file that --write replaces the target's record in")
	date := flags.String("date", "", "the calibration's date for the record's provenance (default today, UTC)")
	cmd.RunE = runVerb(func(args []string, stdout, stderr io.Writer) int {
		fail := func(code int, format string, a ...any) int {
			fmt.Fprintf(stderr, "amkctl calibrate: "+format+"\n", a...)
			return code
		}
		if len(args) == 0 {
			return fail(exitBadInput, "at least one VERDICT.json or directory of verdicts is required")
		}
		target, err := ir.Target(*gpu)
		if err != nil {
			return fail(exitBadInput, "%v", err)
		}
		day := *date
		if day == "" {
			day = time.Now().UTC().Format(time.DateOnly)
		}
		if _, err := time.Parse(time.DateOnly, day); err != nil {
			return fail(exitBadInput, "--date %q is not YYYY-MM-DD", day)
		}
		files, err := readVerdictFiles(args)
		if err != nil {
			return fail(exitBadInput, "%v", err)
		}
		ms, skipped, err := calibrate.FromVerdicts(files, target)
		if err != nil {
			return fail(exitBadInput, "refused:\n%v", err)
		}
		if skipped > 0 {
			fmt.Fprintf(stderr, "amkctl calibrate: %d campaign trials skipped (failed, rejected, incorrect or predicted)\n", skipped)
		}
		res, err := calibrate.Fit(target, ms, *fit)
		if err != nil {
			return fail(exitBadInput, "%v", err)
		}
		if res.Worse() {
			if !*jsonOut {
				fmt.Fprint(stdout, res.Markdown())
			}
			return fail(exitRejected, "the fit predicts these points worse than the defaults (RMS log error %.4f, defaults %.4f): no record", res.RMSAfter, res.RMSBefore)
		}
		recs, err := baseRecords(*costsFile)
		if err != nil {
			return fail(exitBadInput, "%v", err)
		}
		recs[target.Name] = res.Record(schedule.CostProvenance{Date: day, Device: devices(ms), Command: calibrateCommand(target.Name, *fit, args)})
		data, err := recs.Marshal()
		if err == nil {
			_, err = schedule.ParseCostRecords(data)
		}
		if err != nil {
			return fail(exitInternal, "internal error: the fitted record does not check: %v", err)
		}
		if *jsonOut {
			_, _ = stdout.Write(data)
		} else {
			fmt.Fprintf(stdout, "%s\nThe data file (%s):\n\n```json\n%s```\n", res.Markdown(), *costsFile, data)
		}
		for _, p := range res.Params {
			if !p.Identified {
				fmt.Fprintf(stderr, "amkctl calibrate: %s is not identified by these points (partial sensitivity %.3g): kept at its default\n", p.Name, p.Sensitivity)
			}
		}
		if *write {
			if err := writeFileAtomic(*costsFile, data); err != nil {
				return fail(exitBadInput, "%v", err)
			}
			fmt.Fprintf(stderr, "amkctl calibrate: wrote %s's record to %s\n", target.Name, *costsFile)
		}
		return exitOK
	})
	return cmd
}

// readVerdictFiles reads the verdict files named by args: files, and the
// *.json files directly inside directories (in name order), each bounded.
func readVerdictFiles(args []string) ([]calibrate.VerdictFile, error) {
	var paths []string
	for _, a := range args {
		fi, err := os.Stat(a)
		if err != nil {
			return nil, err
		}
		if !fi.IsDir() {
			paths = append(paths, a)
			continue
		}
		entries, err := os.ReadDir(a)
		if err != nil {
			return nil, err
		}
		n := 0
		for _, e := range entries {
			if e.Type().IsRegular() && strings.HasSuffix(e.Name(), ".json") {
				paths = append(paths, filepath.Join(a, e.Name()))
				n++
			}
		}
		if n == 0 {
			return nil, fmt.Errorf("%s: no *.json verdicts in the directory", a)
		}
		if len(paths) > calibrate.MaxVerdictFiles {
			break
		}
	}
	if len(paths) > calibrate.MaxVerdictFiles {
		return nil, fmt.Errorf("more than %d verdict files", calibrate.MaxVerdictFiles)
	}
	files := make([]calibrate.VerdictFile, len(paths))
	for i, p := range paths {
		limit := int64(calibrate.MaxVerdictBytes)
		if strings.HasSuffix(p, ".jsonl") {
			limit = calibrate.MaxTrialsLogBytes
		}
		data, err := inputfile.Read(p, limit)
		if err != nil {
			return nil, err
		}
		files[i] = calibrate.VerdictFile{Name: p, Data: data}
	}
	return files, nil
}

// baseRecords are the records the new one joins: the data file's, when it
// exists, else the ones built into amkctl.
func baseRecords(path string) (schedule.CostRecords, error) {
	data, err := inputfile.Read(path, schedule.MaxCostRecordsBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return schedule.CalibratedCosts()
	}
	if err != nil {
		return nil, err
	}
	recs, err := schedule.ParseCostRecords(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return recs, nil
}

// devices names the verdicts' devices, each once.
func devices(ms []calibrate.Measurement) string {
	seen := map[string]bool{}
	var out []string
	for _, m := range ms {
		if !seen[m.Device] {
			seen[m.Device] = true
			out = append(out, m.Device)
		}
	}
	sort.Strings(out)
	return strings.Join(out, "; ")
}

// calibrateCommand is the command line for the provenance, each input
// named by its last element (no host paths in a committed record).
func calibrateCommand(target string, fit, args []string) string {
	parts := []string{"amkctl", "calibrate", "--gpu", target}
	if len(fit) > 0 {
		parts = append(parts, "--fit", strings.Join(fit, ","))
	}
	for _, a := range args {
		parts = append(parts, filepath.Base(a))
	}
	return strings.Join(parts, " ")
}
