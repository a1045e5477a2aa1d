package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/amk-dev/amk/campaign"
	"github.com/amk-dev/amk/runner"
)

func init() {
	addVerb(newStatusCmd)
	addVerb(newNextCmd)
	addVerb(newReportCmd)
	addVerb(newRecordCmd)
	addVerb(newCampaignsCmd)
}

// campaignVerb builds the command of a verb that acts on one campaign.
func campaignVerb(use, short string) (*cobra.Command, campaignFlags) {
	cmd := &cobra.Command{Use: use, Short: short}
	return cmd, addCampaignFlags(cmd)
}

// campaignFlags selects a campaign: --campaign ID, a campaign id, or MODEL
// --gpu G [--device D] [--name N], or the only campaign of the workspace.
// With --server (or $AMK_SERVER) the verb acts on a scheduler, where a
// campaign id may also be given as the only argument.
type campaignFlags struct {
	workspace, id, gpu, device, name *string
	jsonOut                          *bool
	remote                           remoteFlags
}

func addCampaignFlags(cmd *cobra.Command) campaignFlags {
	fs := cmd.Flags()
	return campaignFlags{
		remote:    addRemoteFlags(cmd),
		workspace: fs.String("workspace", "workspace", "workspace directory"),
		id:        fs.String("campaign", "", "campaign id (see amkctl campaigns)"),
		gpu:       addGPUFlag(cmd, "", "with MODEL: the campaign's GPU target"),
		device:    addDeviceFlag(cmd, "with MODEL: the campaign's device (cpu or cuda)"),
		name:      fs.String("name", "", "with MODEL: the campaign's name, if it has one"),
		jsonOut:   addJSONFlags(cmd, "print JSON instead of text"),
	}
}

func (cf campaignFlags) resolve(positional []string) (*runner.Workspace, string, error) {
	if _, err := os.Stat(*cf.workspace); err != nil {
		return nil, "", fmt.Errorf("no workspace at %s (run amkctl autoresearch first, or pass --workspace)", *cf.workspace)
	}
	ws, err := runner.OpenWorkspace(*cf.workspace)
	if err != nil {
		return nil, "", err
	}
	switch {
	case *cf.id != "":
		return ws, *cf.id, nil
	case len(positional) == 1:
		if *cf.gpu == "" {
			if ws.Exists(positional[0]) {
				return ws, positional[0], nil
			}
			return nil, "", fmt.Errorf("no campaign %q in %s; a MODEL needs --gpu to name a campaign (see amkctl campaigns)", positional[0], ws.Dir)
		}
		return ws, campaign.ID(positional[0], *cf.gpu, *cf.device, *cf.name), nil
	case len(positional) > 1:
		return nil, "", fmt.Errorf("unexpected arguments %q", positional[1:])
	}
	ids, err := ws.IDs()
	if err != nil {
		return nil, "", err
	}
	switch len(ids) {
	case 0:
		return nil, "", fmt.Errorf("ERROR: no campaign state in %s (start one with amkctl autoresearch)", ws.Dir)
	case 1:
		return ws, ids[0], nil
	}
	return nil, "", fmt.Errorf("%d campaigns in %s (%s): choose one with --campaign ID or MODEL --gpu G", len(ids), ws.Dir, strings.Join(ids, ", "))
}

// printJSON prints v as indented JSON.
func printJSON(w io.Writer, v any) int {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return exitInternal
	}
	return exitOK
}

func newStatusCmd() *cobra.Command {
	cmd, cf := campaignVerb("status [CAMPAIGN | MODEL --gpu G | --campaign ID] [--workspace DIR | --server URL] [--json]",
		"print a campaign's status (baseline, best, speedup, plateau counter)")
	cmd.RunE = runVerb(func(pos []string, stdout, stderr io.Writer) int {
		if c, err := cf.remote.client(); err != nil {
			fmt.Fprintln(stderr, "amkctl status:", err)
			return exitBadInput
		} else if c != nil {
			return remoteStatus(c, cf, pos, stdout, stderr)
		}
		ws, id, err := cf.resolve(pos)
		if err != nil {
			fmt.Fprintln(stderr, "amkctl status:", err)
			return exitRejected
		}
		c, err := ws.View(id)
		if err != nil {
			fmt.Fprintln(stderr, "amkctl status:", err)
			return exitRejected
		}
		now := time.Now().UTC()
		if *cf.jsonOut {
			return printJSON(stdout, c.StatusReport(now))
		}
		fmt.Fprint(stdout, c.StatusText(now))
		return exitOK
	})
	return cmd
}

func newNextCmd() *cobra.Command {
	cmd, cf := campaignVerb("next [CAMPAIGN | MODEL --gpu G | --campaign ID] [--workspace DIR | --server URL] [--json]",
		"continue-or-stop decision for a campaign (move-on criteria, hottest region)")
	cmd.RunE = runVerb(func(pos []string, stdout, stderr io.Writer) int {
		if c, err := cf.remote.client(); err != nil {
			fmt.Fprintln(stderr, "amkctl next:", err)
			return exitBadInput
		} else if c != nil {
			return remoteNext(c, cf, pos, stdout, stderr)
		}
		ws, id, err := cf.resolve(pos)
		if err != nil {
			fmt.Fprintln(stderr, "amkctl next:", err)
			return exitRejected
		}
		now := time.Now().UTC()
		var c *campaign.Campaign
		// With the lock, a criterion that tripped is made to stick (the
		// campaign flips to done); while a driver holds it, the driver does.
		if l, err := ws.Open(id); err == nil {
			if c = l.Campaign(); c.Status() == campaign.StatusOptimizing {
				if _, err := l.Apply(campaign.Tick{Time: now}); err != nil && !errors.Is(err, campaign.ErrDone) {
					l.Close()
					fmt.Fprintln(stderr, "amkctl next:", err)
					return exitRejected
				}
			}
			l.Close()
		} else if errors.Is(err, runner.ErrLocked) {
			if c, err = ws.View(id); err != nil {
				fmt.Fprintln(stderr, "amkctl next:", err)
				return exitRejected
			}
		} else {
			fmt.Fprintln(stderr, "amkctl next:", err)
			return exitRejected
		}
		n := c.Next(now)
		if *cf.jsonOut {
			return printJSON(stdout, n)
		}
		fmt.Fprint(stdout, n.Text())
		return exitOK
	})
	return cmd
}

func newReportCmd() *cobra.Command {
	cmd, cf := campaignVerb("report [CAMPAIGN | MODEL --gpu G | --campaign ID] [--workspace DIR | --server URL] [--json]",
		"write a campaign's reports (markdown, JSON, SVG plot) and print its status")
	cmd.RunE = runVerb(func(pos []string, stdout, stderr io.Writer) int {
		if c, err := cf.remote.client(); err != nil {
			fmt.Fprintln(stderr, "amkctl report:", err)
			return exitBadInput
		} else if c != nil {
			return remoteReport(c, cf, pos, stdout, stderr)
		}
		ws, id, err := cf.resolve(pos)
		if err != nil {
			fmt.Fprintln(stderr, "amkctl report:", err)
			return exitRejected
		}
		c, err := ws.View(id)
		if err != nil {
			fmt.Fprintln(stderr, "amkctl report:", err)
			return exitRejected
		}
		now := time.Now().UTC()
		dir := ws.CampaignDir(id)
		if err := runner.WriteReport(dir, c, now); err != nil {
			fmt.Fprintln(stderr, "amkctl report:", err)
			return exitRejected
		}
		agg := filepath.Join(dir, "aggregate_report.md")
		if err := writeFileAtomic(agg, []byte(c.ReportMarkdown(now))); err != nil {
			fmt.Fprintln(stderr, "amkctl report:", err)
			return exitRejected
		}
		if *cf.jsonOut {
			return printJSON(stdout, c.WakeUp(now))
		}
		fmt.Fprintf(stdout, "Report written to %s (wake-up report: %s)\n", agg, filepath.Join(dir, "report.md"))
		fmt.Fprint(stdout, c.StatusText(now))
		return exitOK
	})
	return cmd
}

func newRecordCmd() *cobra.Command {
	cmd, cf := campaignVerb("record STATUS [CAMPAIGN | MODEL --gpu G | --campaign ID] [--workspace DIR | --server URL] [--latency-us F] [--pct-roofline F] [--kind K] [--correctness C] [--schedule-id S] [--schedule cfg.json] [--description D] [--regions attention=0.5,mlp=0.4,lm_head=0.1]",
		"record an outside agent's own experiment into a campaign")
	fs := cmd.Flags()
	latency := fs.Float64("latency-us", -1, "latency in µs (needs correctness PASS); negative: none")
	pct := fs.Float64("pct-roofline", -1, "latency / floor x 100; negative: none")
	bound := fs.Float64("bound-us", -1, "the HBM floor in µs; negative: none")
	kind := fs.String("kind", "", "latency kind: measured-gpu or predicted")
	correctness := fs.String("correctness", "", "PASS, FAIL, REJECTED, CRASH or TIMEOUT; empty: from STATUS")
	schedID := fs.String("schedule-id", "", "schedule id; empty: computed from --schedule")
	cfgPath := addScheduleFlag(cmd, "the schedule config JSON the experiment used")
	desc := fs.String("description", "", "free text")
	source := fs.String("source", "agent", "provenance of the experiment")
	regions := fs.String("regions", "", "critical-path shares, e.g. attention=0.4,mlp=0.5,lm_head=0.1")
	cmd.RunE = runVerb(func(pos []string, stdout, stderr io.Writer) int {
		if len(pos) == 0 {
			fmt.Fprintln(stderr, "amkctl record: STATUS (kept, revert, tried, failed, crash, timeout, rejected) is required")
			return exitBadInput
		}
		status, rest := pos[0], pos[1:]
		client, err := cf.remote.client()
		if err != nil {
			fmt.Fprintln(stderr, "amkctl record:", err)
			return exitBadInput
		}
		rec := campaign.Record{Time: time.Now().UTC(), Status: status, Correctness: *correctness, Kind: *kind,
			ScheduleID: *schedID, Description: *desc, Source: *source}
		opt := func(v float64) *float64 {
			if v < 0 {
				return nil
			}
			return &v
		}
		rec.LatencyUS, rec.PctOfRoofline, rec.BoundUS = opt(*latency), opt(*pct), opt(*bound)
		if *cfgPath != "" {
			data, err := readInput(*cfgPath, 1<<20)
			if err != nil {
				fmt.Fprintln(stderr, "amkctl record:", err)
				return exitBadInput
			}
			rec.Point = data
		}
		if *regions != "" {
			if rec.Regions, err = parseRegions(*regions); err != nil {
				fmt.Fprintln(stderr, "amkctl record:", err)
				return exitBadInput
			}
		}
		if client != nil {
			return remoteRecord(client, cf, rest, rec, stdout, stderr)
		}
		ws, id, err := cf.resolve(rest)
		if err != nil {
			fmt.Fprintln(stderr, "amkctl record:", err)
			return exitRejected
		}
		l, err := ws.Open(id)
		if err != nil {
			fmt.Fprintln(stderr, "amkctl record:", err)
			return exitRejected
		}
		defer l.Close()
		dec, err := l.Apply(rec)
		if err != nil {
			fmt.Fprintln(stderr, "amkctl record: refused:", err)
			return exitRejected
		}
		for _, r := range dec.Rows {
			fmt.Fprintf(stdout, "recorded experiment %d: %s %s\n", r.Experiment, r.Tag, r.Description)
		}
		if *cf.jsonOut {
			return printJSON(stdout, l.Campaign().StatusReport(rec.Time))
		}
		fmt.Fprint(stdout, l.Campaign().StatusText(rec.Time))
		return exitOK
	})
	return cmd
}

func parseRegions(s string) (map[string]float64, error) {
	out := map[string]float64{}
	for _, part := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return nil, fmt.Errorf("--regions: %q is not region=fraction", part)
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < 0 || f > 1 {
			return nil, fmt.Errorf("--regions: %s=%s is not a fraction in [0, 1]", k, v)
		}
		out[k] = f
	}
	return out, nil
}

func newCampaignsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "campaigns [--workspace DIR | --server URL] [--json]",
		Short: "list the campaigns of a workspace or a scheduler",
		Args:  cobra.NoArgs,
	}
	remote := addRemoteFlags(cmd)
	workspace := cmd.Flags().String("workspace", "workspace", "workspace directory")
	jsonOut := addJSONFlags(cmd, "print JSON")
	cmd.RunE = runVerb(func(_ []string, stdout, stderr io.Writer) int {
		if c, err := remote.client(); err != nil {
			fmt.Fprintln(stderr, "amkctl campaigns:", err)
			return exitBadInput
		} else if c != nil {
			return remoteCampaigns(c, *jsonOut, stdout, stderr)
		}
		ws, err := runner.OpenWorkspace(*workspace)
		if err != nil {
			fmt.Fprintln(stderr, "amkctl campaigns:", err)
			return exitRejected
		}
		ids, err := ws.IDs()
		if err != nil {
			fmt.Fprintln(stderr, "amkctl campaigns:", err)
			return exitRejected
		}
		now := time.Now().UTC()
		var reports []campaign.StatusReport
		for _, id := range ids {
			c, err := ws.View(id)
			if err != nil {
				fmt.Fprintf(stderr, "amkctl campaigns: %s: %v\n", id, err)
				continue
			}
			reports = append(reports, c.StatusReport(now))
		}
		if *jsonOut {
			if reports == nil {
				reports = []campaign.StatusReport{}
			}
			return printJSON(stdout, reports)
		}
		if len(reports) == 0 {
			fmt.Fprintf(stdout, "no campaigns in %s\n", ws.Dir)
			return exitOK
		}
		printCampaignTable(stdout, reports)
		return exitOK
	})
	return cmd
}

// printCampaignTable prints one line per campaign.
func printCampaignTable(stdout io.Writer, reports []campaign.StatusReport) {
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATUS\tEXPERIMENTS\tKEPT\tBEST US\tKIND\tSPEEDUP")
	for _, r := range reports {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t%s\n", r.ID, r.Status, r.ExperimentsRun, r.ExperimentsKept,
			optFloat(r.BestUS, "%.3f"), orDash(r.BestKind), optFloat(r.Speedup, "%.3fx"))
	}
	tw.Flush()
}

func optFloat(f *float64, format string) string {
	if f == nil {
		return "-"
	}
	return fmt.Sprintf(format, *f)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
