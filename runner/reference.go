package runner

import (
	"fmt"
	"path/filepath"
	"strings"
)

// ReferencePaths are the reference CLI's artifact flags (`autoresearch
// --corpus --results --state` of the Python reference), which amk takes as
// aliases of its workspace layout:
//
//   - State: AMK's one-campaign orchestration state; amk keeps a state per
//     campaign in <workspace>/campaigns/<id>/ledger.json, so the state
//     file's directory is the workspace (AMK's default,
//     workspace/amk_orchestration_state.json, is amk's default workspace);
//   - Results: AMK's results.tsv; amk writes one per campaign in
//     <workspace>/campaigns/<id>/results.tsv, so the file's directory is the
//     workspace;
//   - Corpus: the flywheel corpus file itself (any path).
type ReferencePaths struct {
	Corpus, Results, State string
}

// Workspace resolves the paths against the --workspace value (explicit
// reports whether the user gave it): every path that names a workspace must
// name the same one, and an explicit --workspace must agree with them. The
// notes say where amk will write what the reference would have written.
func (rp ReferencePaths) Workspace(workspace string, explicit bool) (dir, corpus string, notes []string, err error) {
	dir = workspace
	from := "--workspace"
	agree := func(flag, path string) error {
		d := filepath.Dir(path)
		if !explicit && from == "--workspace" {
			dir, from = d, flag
			return nil
		}
		if filepath.Clean(d) != filepath.Clean(dir) {
			return fmt.Errorf("%s %s puts the workspace in %s, but %s puts it in %s: amk keeps one workspace "+
				"(campaigns/<id>/ledger.json and results.tsv, flywheel/corpus.jsonl)", flag, path, d, from, dir)
		}
		return nil
	}
	if rp.State != "" {
		if err := agree("--state", rp.State); err != nil {
			return "", "", nil, err
		}
		notes = append(notes, fmt.Sprintf("--state %s: the campaign state is %s/campaigns/<id>/ledger.json", rp.State, dir))
	}
	if rp.Results != "" {
		if err := agree("--results", rp.Results); err != nil {
			return "", "", nil, err
		}
		notes = append(notes, fmt.Sprintf("--results %s: the rows go to %s/campaigns/<id>/results.tsv", rp.Results, dir))
	}
	if strings.TrimSpace(dir) == "" {
		return "", "", nil, fmt.Errorf("the workspace directory is empty")
	}
	return dir, rp.Corpus, notes, nil
}
