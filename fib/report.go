package fib

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/amk-dev/amk/flywheel"
	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/model"
	"github.com/amk-dev/amk/runner"
)

// Exit codes of the fib verbs (amkctl's).
const (
	ExitOK       = 0
	ExitRejected = 1
	ExitBadInput = 2
)

// WriteValidation prints one line per finding (path[:line]: level: field:
// reason) and a summary, and returns the exit code: 2 when a file is not
// JSON or not a record of its kind, else 1 when a record breaks a rule,
// else 0.
func WriteValidation(w io.Writer, ds *Dataset) int {
	counts := map[string][2]int{}
	code := ExitOK
	for _, r := range ds.Reports {
		c := counts[r.Kind]
		switch {
		case r.Err != nil:
			fmt.Fprintf(w, "%s: %v\n", r.Where(), r.Err)
			code = ExitBadInput
			c[1]++
		default:
			for _, p := range r.Problems {
				fmt.Fprintf(w, "%s: %s\n", r.Where(), p)
			}
			if len(Errors(r.Problems)) > 0 {
				if code == ExitOK {
					code = ExitRejected
				}
				c[1]++
			} else {
				c[0]++
			}
		}
		counts[r.Kind] = c
	}
	var parts []string
	for _, k := range []string{KindDefinition, KindWorkload, KindTrace, KindSolution} {
		if c, ok := counts[k]; ok {
			parts = append(parts, fmt.Sprintf("%d %ss hold, %d do not", c[0], k, c[1]))
		}
	}
	if len(parts) == 0 {
		fmt.Fprintln(w, "no Definition, workload, trace or solution files found")
		return ExitBadInput
	}
	verdict := "[VALID]"
	if code != ExitOK {
		verdict = "[REJECTED]"
	}
	fmt.Fprintf(w, "%s %s\n", verdict, strings.Join(parts, "; "))
	return code
}

// WriteMappings prints which Definitions map onto which amk micro-kernel,
// with one line per case, and which do not, with why.
func WriteMappings(w io.Writer, ms []Mapping) {
	mapped := 0
	for _, m := range ms {
		if m.Mapped() {
			mapped++
			fmt.Fprintf(w, "[MAPPED]   %s (%s) -> %s, %d kernel-tuning case(s)\n", m.Definition, m.OpType, m.Op, len(m.Cases))
			for _, c := range m.Cases {
				note := ""
				if c.Note != "" {
					note = "; " + c.Note
				}
				fmt.Fprintf(w, "           workload %s: %s %s batch %d (%s%s)\n", c.Workload, strings.ToLower(c.Op.String()),
					c.Model.DType, c.Batch, caseShape(c), note)
			}
			for _, r := range m.Reasons {
				fmt.Fprintf(w, "           not served: %s\n", r)
			}
			continue
		}
		fmt.Fprintf(w, "[UNMAPPED] %s (%s): %s\n", m.Definition, m.OpType, strings.Join(m.Reasons, "; "))
	}
	fmt.Fprintf(w, "%d of %d Definitions map onto amk micro-kernels\n", mapped, len(ms))
}

func caseShape(c CaseSpec) string {
	m := c.Model
	switch c.Op {
	case ir.OpGEMVTile, ir.OpGEMMTile:
		return fmt.Sprintf("N %d, K %d", m.Vocab, m.Hidden)
	case ir.OpRMSNORM:
		return fmt.Sprintf("hidden %d, eps %g", m.Hidden, m.RMSEps)
	case ir.OpAttentionTile:
		return fmt.Sprintf("heads %d/%d, head_dim %d, kv_len %d", m.NHeads, m.NKVHeads, m.HeadDim, c.Pos+1)
	case ir.OpSiLUMul:
		return fmt.Sprintf("intermediate %d", m.Intermediate)
	case ir.OpROPE:
		return fmt.Sprintf("heads %d, head_dim %d, theta %g", m.NHeads, m.HeadDim, m.RopeTheta)
	case ir.OpKVAppend:
		return fmt.Sprintf("kv heads %d, head_dim %d, max_seq %d, pos %d", m.NKVHeads, m.HeadDim, m.MaxSeq, c.Pos)
	case ir.OpEMBED:
		return fmt.Sprintf("vocab %d, hidden %d", m.Vocab, m.Hidden)
	}
	return fmt.Sprintf("hidden %d", m.Hidden)
}

// ExportRequest is one `amkctl fib export`.
type ExportRequest struct {
	// Model is a preset name or a HuggingFace config.json path.
	Model string
	GPU   string
	Out   string
	// Workspace and Campaign select a campaign whose verdicts become
	// Traces ("" = none).
	Workspace, Campaign string
	// Results is a results.tsv whose Loop-1 rows become Traces ("" = none).
	Results string
	Options ExportOptions
}

// ExportSummary is what an export wrote.
type ExportSummary struct {
	Model       string   `json:"model"`
	Definitions int      `json:"definitions"`
	Workloads   int      `json:"workloads"`
	Traces      int      `json:"traces"`
	Solutions   int      `json:"solutions"`
	Files       int      `json:"files"`
	Notes       []string `json:"notes"`
}

// ErrBadRequest marks an export request that names something that does not
// exist or does not fit (exit 2).
var ErrBadRequest = errors.New("bad request")

// RunExport writes the Definitions of the model's decode step and, when
// asked, the Traces of a campaign and of Loop-1 rows under req.Out.
func RunExport(req ExportRequest) (*ExportSummary, error) {
	target, err := ir.Target(req.GPU)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadRequest, err)
	}
	cfg, err := model.Load(req.Model)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadRequest, err)
	}
	slug := ModelSlug(req.Model)
	if strings.ContainsAny(req.Model, `/\`) || strings.HasSuffix(req.Model, ".json") {
		slug = ModelSlug(cfg.Name)
	}
	opts := req.Options
	opts.Target = target.Name
	exported, err := Export(slug, cfg, opts)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadRequest, err)
	}
	files, err := WriteDefinitions(req.Out, exported)
	if err != nil {
		return nil, err
	}
	sum := &ExportSummary{Model: slug, Definitions: len(exported), Notes: []string{}}
	defs := map[string]*Definition{}
	for _, e := range exported {
		sum.Workloads += len(e.Workloads)
		defs[e.Definition.Name] = e.Definition
	}
	var traces []Trace
	var sols []*Solution
	if req.Campaign != "" {
		run, modelName, err := ReadCampaign(req.Workspace, req.Campaign)
		if err != nil {
			return nil, err
		}
		if modelName != req.Model || run.Target != target.Name {
			return nil, fmt.Errorf("%w: campaign %s is %s on %s, not %s on %s", ErrBadRequest, req.Campaign, modelName, run.Target, req.Model, target.Name)
		}
		t, s, _, skipped, err := CampaignTraces(exported, run)
		if err != nil {
			return nil, err
		}
		traces, sols = append(traces, t...), append(sols, s...)
		sum.Notes = append(sum.Notes, fmt.Sprintf("campaign %s: %d verdicts as Traces (latency_kind %s)", req.Campaign, len(t), run.Kind))
		if skipped > 0 {
			sum.Notes = append(sum.Notes, fmt.Sprintf("campaign %s: %d PASS verdicts without a latency (withheld: below the streamed-bytes floor, or no floor for the target) have no Trace form and were left out", req.Campaign, skipped))
		}
	}
	if req.Results != "" {
		if req.Model != CaseModel {
			return nil, fmt.Errorf("%w: kernel-tuning cases are cut from the %s preset; export %s to attach kernel-tuning results", ErrBadRequest, CaseModel, CaseModel)
		}
		rows, err := flywheel.ReadRows(req.Results)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBadRequest, err)
		}
		t, s, skipped, unmatched, err := InstructionTraces(exported, target.Name, flywheel.Env{Target: target.Name, Device: "cuda"},
			time.Now().UTC().Format(time.RFC3339), rows)
		if err != nil {
			return nil, err
		}
		traces, sols = append(traces, t...), append(sols, s...)
		sum.Notes = append(sum.Notes, fmt.Sprintf("%s: %d kernel-tuning verdicts as Traces (measured-gpu), %d without a latency left out, %d of ops with no Definition", req.Results, len(t), skipped, unmatched))
	}
	if len(traces) > 0 {
		more, err := WriteTraces(req.Out, Author, defs, traces, dedupeSolutions(sols))
		if err != nil {
			return nil, err
		}
		files = append(files, more...)
	}
	sum.Traces, sum.Solutions, sum.Files = len(traces), len(dedupeSolutions(sols)), len(files)
	return sum, nil
}

func dedupeSolutions(sols []*Solution) []*Solution {
	seen := map[string]bool{}
	var out []*Solution
	for _, s := range sols {
		key := s.Definition + "/" + s.Name
		if !seen[key] {
			seen[key] = true
			out = append(out, s)
		}
	}
	return out
}

// ReadCampaign reads a campaign's ledger and results.tsv from a workspace:
// its verdicts, latency kind, environment and position, and its model.
func ReadCampaign(workspace, id string) (CampaignRun, string, error) {
	ws := &runner.Workspace{Dir: workspace}
	if !ws.Exists(id) {
		return CampaignRun{}, "", fmt.Errorf("%w: no campaign %q in workspace %s", ErrBadRequest, id, workspace)
	}
	c, err := ws.View(id)
	if err != nil {
		return CampaignRun{}, "", err
	}
	st := c.State()
	path := filepath.Join(ws.CampaignDir(id), "results.tsv")
	var rows []flywheel.Row
	if _, err := os.Stat(path); err == nil {
		if rows, err = flywheel.ReadRows(path); err != nil {
			return CampaignRun{}, "", err
		}
	}
	run := CampaignRun{Kind: string(st.LatencyKind), Target: st.GPU, Env: st.Env, Pos: st.Settings.Pos,
		Timestamp: st.LastEventAt.UTC().Format(time.RFC3339), Rows: rows}
	return run, st.Model, nil
}

// WriteJSON writes v as indented JSON.
func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
