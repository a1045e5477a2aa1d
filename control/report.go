package control

import (
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
	files := []string{AggregateReportFile, "report.json", "report.md", "report.svg"}
	w := c.WakeUp(now)
	if w.BestFile != "" {
		files = append(files, campaign.BestConfigFile)
	}
	if len(w.KnobImportance) > 0 {
		files = append(files, campaign.KnobSliceFile)
	}
	for i, n := range files {
		files[i] = filepath.Join(dir, n)
	}
	return ReportFiles{ID: id, Dir: dir, Files: files}, nil
}
