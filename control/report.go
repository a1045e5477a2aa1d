package control

import (
	"context"
	"os"
	"path/filepath"
	"time"

	"github.com/amk-dev/amk/atomicfile"
	"github.com/amk-dev/amk/campaign"
	"github.com/amk-dev/amk/runner"
)

// AggregateReportFile is the file name of the campaign report (all
// experiments, per region) beside the wake-up report's report.md.
const AggregateReportFile = "aggregate_report.md"

// WriteReports writes a campaign's report files into dir: the wake-up
// report (report.json, report.md, report.svg, and best.json and knobs.svg
// once there is a best and enough trials) and the aggregate report.
// It is what amkctl report does locally and the scheduler does for
// POST /v1/campaigns/{id}/report.
func WriteReports(id, dir string, c *campaign.Campaign, now time.Time) (ReportFiles, error) {
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	if err := runner.WriteReport(dir, c, now); err != nil {
		return ReportFiles{}, err
	}
	if err := atomicfile.Write(filepath.Join(dir, AggregateReportFile), []byte(c.ReportMarkdown(now))); err != nil {
		return ReportFiles{}, err
	}
	return reportFiles(id, dir, c.WakeUp(now)), nil
}

// reportFiles lists the report files written into dir for the wake-up
// report w.
func reportFiles(id, dir string, w campaign.WakeUp) ReportFiles {
	files := []string{AggregateReportFile, "report.json", "report.md", "report.svg"}
	if w.BestFile != "" {
		files = append(files, campaign.BestConfigFile)
	}
	if len(w.KnobImportance) > 0 {
		files = append(files, campaign.KnobSliceFile)
	}
	for i, n := range files {
		files[i] = filepath.Join(dir, n)
	}
	return ReportFiles{ID: id, Dir: dir, Files: files}
}

// SaveReports fetches a campaign's reports from s (a workspace here, or a
// scheduler) and writes their files into dir on this machine: the wake-up
// report (report.json, report.md, report.svg, best.json and the knob plot
// when there are some) and the aggregate report. It
// is how amkctl report --out gets a scheduler's report onto the user's
// machine. It returns the wake-up report too, for printing.
func SaveReports(ctx context.Context, s Service, id, dir string) (ReportFiles, campaign.WakeUp, error) {
	wake, err := s.Report(ctx, id)
	if err != nil {
		return ReportFiles{}, campaign.WakeUp{}, err
	}
	agg, err := s.AggregateReport(ctx, id)
	if err != nil {
		return ReportFiles{}, campaign.WakeUp{}, err
	}
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return ReportFiles{}, campaign.WakeUp{}, err
	}
	if err := runner.WriteWakeUp(dir, wake); err != nil {
		return ReportFiles{}, campaign.WakeUp{}, err
	}
	if err := atomicfile.Write(filepath.Join(dir, AggregateReportFile), []byte(agg)); err != nil {
		return ReportFiles{}, campaign.WakeUp{}, err
	}
	return reportFiles(id, dir, wake), wake, nil
}
