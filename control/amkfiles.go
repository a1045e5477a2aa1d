package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/amk-dev/amk/atomicfile"
	"github.com/amk-dev/amk/campaign"
	"github.com/amk-dev/amk/flywheel"
)

// ExportAMKFiles writes campaign id of a workspace here under the
// reference's (AMK's) file names into dir, so that AMK's tools pointed at
// dir read it: amk_orchestration_state.json (the status as AMK's
// orchestrator keeps it), results.tsv (the campaign's rows; amk's
// results.tsv already has AMK's columns), amk_overnight_report.json and
// amk_overnight_report.md (the wake-up report). Each file is replaced
// whole (never left half-written); the files are a snapshot of the
// campaign when exported, and amk never reads them back (AMK's files
// import with amkctl corpus import). It returns the paths written.
//
// A scheduler's campaigns are exported on the scheduler's machine: the
// API does not serve results.tsv.
func ExportAMKFiles(ctx context.Context, s Service, id, dir string) ([]string, error) {
	var local *Local
	if c, ok := s.(*Campaigns); ok {
		local, _ = c.Backend().(*Local)
	}
	if local == nil {
		return nil, fmt.Errorf("campaign %s is %s: its results.tsv is on the scheduler's machine; export there with --workspace", id, s.Where())
	}
	st, err := s.Status(ctx, id)
	if err != nil {
		return nil, err
	}
	wake, err := s.Report(ctx, id)
	if err != nil {
		return nil, err
	}
	results, err := os.ReadFile(filepath.Join(local.Workspace.CampaignDir(id), campaign.AMKResultsFile))
	if errors.Is(err, os.ErrNotExist) {
		results, err = []byte(flywheel.HeaderLine+"\n"), nil // no experiment yet: the header alone, as AMK starts one
	}
	if err != nil {
		return nil, err
	}
	state, err := json.MarshalIndent(st.AMKState(), "", "  ")
	if err != nil {
		return nil, err
	}
	overnight, err := json.MarshalIndent(wake.AMKOvernight(), "", "  ")
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var written []string
	for _, f := range []struct {
		name string
		data []byte
	}{
		{campaign.AMKStateFile, append(state, '\n')},
		{campaign.AMKResultsFile, results},
		{campaign.AMKOvernightJSON, append(overnight, '\n')},
		{campaign.AMKOvernightMD, []byte(wake.Markdown() + "\n")},
	} {
		path := filepath.Join(dir, f.name)
		if err := atomicfile.Write(path, f.data); err != nil {
			return written, err
		}
		written = append(written, path)
	}
	return written, nil
}
