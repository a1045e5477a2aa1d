package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/amk-dev/amk/flywheel"
	"github.com/amk-dev/amk/inputfile"
	"github.com/amk-dev/amk/runner"
	"github.com/amk-dev/amk/schedule"
)

func init() { addVerb(groupCampaign, newCorpusCmd) }

// maxCorpusBytes bounds a corpus or state file read by corpus.
const maxCorpusBytes = flywheel.MaxInspectBytes

// corpusFlags are the flags every corpus subcommand shares.
type corpusFlags struct {
	workspace, corpus *string
}

func (f corpusFlags) path() string {
	if *f.corpus != "" {
		return *f.corpus
	}
	return (&runner.Workspace{Dir: *f.workspace}).CorpusPath()
}

func addCorpusFlags(cmd *cobra.Command) corpusFlags {
	fs := cmd.Flags()
	return corpusFlags{
		workspace: fs.String("workspace", "workspace", "workspace whose flywheel/corpus.jsonl is used"),
		corpus:    fs.String("corpus", "", "the corpus file itself (the reference's flag; overrides --workspace)"),
	}
}

func newCorpusCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "corpus [--workspace DIR | --corpus F] [--results F] [--json]",
		Short: "inspect the flywheel corpus and results; merge corpora; import AMK's corpus, results.tsv and state",
		Long: `corpus summarises the flywheel corpus (kept points per model, GPU and latency
kind, with the best of each) and the experiment rows of --results (any
results.tsv, AMK's included; default every campaign of the workspace), and
counts the rows that join a corpus point by schedule id (amk's ids are the
reference's).

  amkctl corpus merge FILE...          add the records of other corpora (amk or
                                       AMK format), each once
  amkctl corpus import --state F       add the best point of AMK's
                                       amk_orchestration_state.json`,
	}
	cf := addCorpusFlags(cmd)
	results := cmd.Flags().String("results", "", "a results.tsv to summarise (default: every campaign's in the workspace)")
	jsonOut := addJSONFlags(cmd, "print the summary as JSON")
	cmd.RunE = runVerb(func(args []string, stdout, stderr io.Writer) int {
		if len(args) != 0 {
			fmt.Fprintf(stderr, "amkctl corpus: unknown subcommand %q (merge, import)\n", args[0])
			return exitBadInput
		}
		recs, code := readAnyCorpus(cf.path(), stderr)
		if code != exitOK {
			return code
		}
		rows, code := readResults(*results, *cf.workspace, stderr)
		if code != exitOK {
			return code
		}
		s := flywheel.Summarize(recs, corpusRecordID, rows)
		if *jsonOut {
			if err := printJSON(stdout, s); err != nil {
				return exitInternal
			}
			return exitOK
		}
		fmt.Fprint(stdout, s.Text())
		return exitOK
	})
	cmd.AddCommand(newCorpusMergeCmd(), newCorpusImportCmd())
	return cmd
}

func newCorpusMergeCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "merge FILE... [--workspace DIR | --corpus F]",
		Short: "append the records of other corpora (amk or AMK format) that the corpus lacks",
	}
	cf := addCorpusFlags(cmd)
	cmd.RunE = runVerb(func(files []string, stdout, stderr io.Writer) int {
		if len(files) == 0 {
			fmt.Fprintln(stderr, "amkctl corpus merge: at least one FILE is required")
			return exitBadInput
		}
		have, code := readAnyCorpus(cf.path(), stderr)
		if code != exitOK {
			return code
		}
		var srcs [][]flywheel.Record
		for _, f := range files {
			data, err := inputfile.Read(f, maxCorpusBytes)
			if err != nil {
				fmt.Fprintln(stderr, "amkctl corpus merge:", err)
				return exitBadInput
			}
			recs, skipped := flywheel.ParseAnyCorpus(data)
			if skipped > 0 && len(recs) == 0 {
				fmt.Fprintf(stderr, "amkctl corpus merge: %s: none of its %d line(s) is a corpus record (amk or AMK format); nothing merged\n", f, skipped)
				return exitBadInput
			}
			if skipped > 0 {
				fmt.Fprintf(stderr, "amkctl corpus merge: %s: skipped %d lines that are not corpus records\n", f, skipped)
			}
			srcs = append(srcs, recs)
		}
		add, dup := flywheel.MergeCorpus(have, srcs...)
		if len(add) > 0 {
			if err := flywheel.AppendCorpus(cf.path(), add...); err != nil {
				fmt.Fprintln(stderr, "amkctl corpus merge:", err)
				return exitRejected
			}
		}
		fmt.Fprintf(stdout, "merged into %s: %d record(s) added, %d already present\n", cf.path(), len(add), dup)
		return exitOK
	})
	return cmd
}

func newCorpusImportCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "import --state amk_orchestration_state.json [--results results.tsv] [--workspace DIR | --corpus F]",
		Short: "import AMK's orchestration state (its best point) and report how its results.tsv joins",
		Long: `import reads AMK's amk_orchestration_state.json and adds its best point to the
corpus as a kept, correct record (the flywheel prior then warm-starts from
it); with --results it also reads AMK's results.tsv and reports how many rows
join the corpus by schedule id (results rows carry no config, so they are
summarised, not added). AMK's corpus.jsonl is imported with corpus merge.`,
	}
	cf := addCorpusFlags(cmd)
	state := cmd.Flags().String("state", "", "AMK's amk_orchestration_state.json")
	results := cmd.Flags().String("results", "", "AMK's results.tsv")
	cmd.RunE = runVerb(func(args []string, stdout, stderr io.Writer) int {
		if len(args) != 0 || *state == "" {
			fmt.Fprintln(stderr, "amkctl corpus import: --state FILE is required and no arguments are taken")
			return exitBadInput
		}
		data, err := inputfile.Read(*state, maxCorpusBytes)
		if err != nil {
			fmt.Fprintln(stderr, "amkctl corpus import:", err)
			return exitBadInput
		}
		st, rec, ok, err := flywheel.ImportReferenceState(data)
		if err != nil {
			fmt.Fprintln(stderr, "amkctl corpus import:", err)
			return exitBadInput
		}
		have, code := readAnyCorpus(cf.path(), stderr)
		if code != exitOK {
			return code
		}
		fmt.Fprintf(stdout, "AMK campaign %s/%s: %s, %d experiments (%d kept)\n", st.Model, st.GPU, st.Status, *st.ExperimentsRun, st.ExperimentsKept)
		if ok {
			add, _ := flywheel.MergeCorpus(have, []flywheel.Record{rec})
			if len(add) > 0 {
				if err := flywheel.AppendCorpus(cf.path(), add...); err != nil {
					fmt.Fprintln(stderr, "amkctl corpus import:", err)
					return exitRejected
				}
				have = append(have, add...)
			}
			where := "already in"
			if len(add) > 0 {
				where = "added to"
			}
			fmt.Fprintf(stdout, "best point %s (%.3fus, %s): %s %s\n", corpusRecordID(rec), rec.LatencyUS, rec.LatencyKind, where, cf.path())
		} else {
			fmt.Fprintln(stdout, "no correct best point with a config and a floor to import")
		}
		if *results != "" {
			rows, code := readResults(*results, "", stderr)
			if code != exitOK {
				return code
			}
			s := flywheel.Summarize(have, corpusRecordID, rows)
			fmt.Fprintf(stdout, "%s: %d rows, %d join the corpus by schedule id\n", *results, s.Rows, s.JoinedRows)
		}
		return exitOK
	})
	return cmd
}

// corpusRecordID is a corpus record's schedule id ("" if its schedule no
// longer parses).
func corpusRecordID(r flywheel.Record) string {
	p, err := schedule.PointFromValue(r.Schedule)
	if err != nil {
		return ""
	}
	return p.ID()
}

// readAnyCorpus reads a corpus (amk's or AMK's format); a missing one is
// empty.
func readAnyCorpus(path string, stderr io.Writer) ([]flywheel.Record, int) {
	recs, skipped, err := flywheel.ReadAnyCorpusFile(path)
	if err != nil {
		fmt.Fprintln(stderr, "amkctl corpus:", err)
		return nil, exitBadInput
	}
	if skipped > 0 {
		fmt.Fprintf(stderr, "amkctl corpus: %s: skipped %d lines that are not corpus records\n", path, skipped)
	}
	return recs, exitOK
}

// readResults reads one results.tsv, or with path "" every campaign's in
// the workspace (none when workspace is "" too).
func readResults(path, workspace string, stderr io.Writer) ([]flywheel.Row, int) {
	paths := []string{path}
	if path == "" {
		paths = nil
		if workspace != "" {
			paths = (&runner.Workspace{Dir: workspace}).ResultsPaths()
		}
	}
	rows, err := flywheel.ReadResultsFiles(paths...)
	if err != nil {
		fmt.Fprintln(stderr, "amkctl corpus:", err)
		return nil, exitBadInput
	}
	return rows, exitOK
}
