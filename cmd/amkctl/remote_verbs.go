package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/amk-dev/amk/campaign"
	"github.com/amk-dev/amk/internal/api"
)

func remoteStatus(c *api.Client, cf campaignFlags, pos []string, stdout, stderr io.Writer) int {
	ctx, cancel := remoteContext()
	defer cancel()
	id, err := cf.remoteCampaign(ctx, c, pos)
	if err != nil {
		return remoteFail(stderr, "status", err)
	}
	if *cf.jsonOut {
		rep, err := c.Status(ctx, id)
		if err != nil {
			return remoteFail(stderr, "status", err)
		}
		return printJSON(stdout, rep)
	}
	text, err := c.StatusText(ctx, id)
	if err != nil {
		return remoteFail(stderr, "status", err)
	}
	fmt.Fprint(stdout, text)
	return exitOK
}

func remoteNext(c *api.Client, cf campaignFlags, pos []string, stdout, stderr io.Writer) int {
	ctx, cancel := remoteContext()
	defer cancel()
	id, err := cf.remoteCampaign(ctx, c, pos)
	if err != nil {
		return remoteFail(stderr, "next", err)
	}
	n, err := c.Next(ctx, id)
	if err != nil {
		return remoteFail(stderr, "next", err)
	}
	if *cf.jsonOut {
		return printJSON(stdout, n)
	}
	fmt.Fprint(stdout, n.Text())
	return exitOK
}

// remoteReport has the scheduler write the report files (on its machine)
// and prints what the local report prints.
func remoteReport(c *api.Client, cf campaignFlags, pos []string, stdout, stderr io.Writer) int {
	ctx, cancel := remoteContext()
	defer cancel()
	id, err := cf.remoteCampaign(ctx, c, pos)
	if err != nil {
		return remoteFail(stderr, "report", err)
	}
	files, err := c.WriteReport(ctx, id)
	if err != nil {
		return remoteFail(stderr, "report", err)
	}
	if *cf.jsonOut {
		wake, err := c.Report(ctx, id)
		if err != nil {
			return remoteFail(stderr, "report", err)
		}
		return printJSON(stdout, wake)
	}
	text, err := c.StatusText(ctx, id)
	if err != nil {
		return remoteFail(stderr, "report", err)
	}
	agg, wake := files.Dir, files.Dir
	for _, f := range files.Files {
		switch {
		case hasBase(f, "aggregate_report.md"):
			agg = f
		case hasBase(f, "report.md"):
			wake = f
		}
	}
	fmt.Fprintf(stdout, "Report written to %s (wake-up report: %s) on the scheduler's machine\n", agg, wake)
	fmt.Fprint(stdout, text)
	return exitOK
}

// hasBase reports whether a path (in the scheduler's syntax) names base.
func hasBase(path, base string) bool {
	return path == base || strings.HasSuffix(path, "/"+base) || strings.HasSuffix(path, `\`+base)
}

func remoteRecord(c *api.Client, cf campaignFlags, pos []string, rec campaign.Record, stdout, stderr io.Writer) int {
	ctx, cancel := remoteContext()
	defer cancel()
	if len(rec.Point) > 0 && !json.Valid(rec.Point) {
		fmt.Fprintln(stderr, "amkctl record: --schedule is not valid JSON")
		return exitBadInput
	}
	id, err := cf.remoteCampaign(ctx, c, pos)
	if err != nil {
		return remoteFail(stderr, "record", err)
	}
	resp, err := c.Record(ctx, id, api.RecordRequest{Status: rec.Status, Correctness: rec.Correctness,
		LatencyUS: rec.LatencyUS, PctOfRoofline: rec.PctOfRoofline, BoundUS: rec.BoundUS, Kind: rec.Kind,
		Config: rec.Point, ScheduleID: rec.ScheduleID, Description: rec.Description, Source: rec.Source,
		Regions: rec.Regions})
	if err != nil {
		return remoteFail(stderr, "record", err)
	}
	for _, r := range resp.Rows {
		fmt.Fprintf(stdout, "recorded experiment %d: %s %s\n", r.Experiment, r.Tag, r.Description)
	}
	if *cf.jsonOut {
		return printJSON(stdout, resp.Campaign)
	}
	text, err := c.StatusText(ctx, id)
	if err != nil {
		return remoteFail(stderr, "record", err)
	}
	fmt.Fprint(stdout, text)
	return exitOK
}

func remoteCampaigns(c *api.Client, jsonOut bool, stdout, stderr io.Writer) int {
	ctx, cancel := remoteContext()
	defer cancel()
	reports, err := c.Campaigns(ctx)
	if err != nil {
		return remoteFail(stderr, "campaigns", err)
	}
	if jsonOut {
		if reports == nil {
			reports = []campaign.StatusReport{}
		}
		return printJSON(stdout, reports)
	}
	if len(reports) == 0 {
		fmt.Fprintf(stdout, "no campaigns on the scheduler at %s\n", c.Server())
		return exitOK
	}
	printCampaignTable(stdout, reports)
	return exitOK
}
