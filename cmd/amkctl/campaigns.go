package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/amk-dev/amk/campaign"
	"github.com/amk-dev/amk/control"
	"github.com/amk-dev/amk/flywheel"
	"github.com/amk-dev/amk/internal/api"
	"github.com/amk-dev/amk/internal/version"
	"github.com/amk-dev/amk/runner"
	"github.com/amk-dev/amk/schedule"
	"github.com/amk-dev/amk/trial"
)

func init() {
	addVerb(groupCampaign, newStatusCmd)
	addVerb(groupCampaign, newNextCmd)
	addVerb(groupCampaign, newReportCmd)
	addVerb(groupCampaign, newRecordCmd)
	addVerb(groupCampaign, newCampaignsCmd)
}

// The campaign verbs are written once against control.Service: a local
// workspace (--workspace DIR, the default) or a scheduler (--server URL or
// $AMK_SERVER, through its api.Client).

// campaignVerb builds the command of a verb that acts on one campaign.
func campaignVerb(use, short string) (*cobra.Command, campaignFlags) {
	cmd := &cobra.Command{Use: use, Short: short}
	return cmd, addCampaignFlags(cmd)
}

// campaignFlags selects a campaign: --campaign ID, a campaign id, or MODEL
// --gpu G [--device D] [--name N], or the only campaign there is; in the
// workspace, or on a scheduler with --server.
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

// open returns the scheduler's campaigns with --server (or $AMK_SERVER),
// the workspace's otherwise; a workspace that does not exist is created
// when create is set and an error otherwise. It reports failures itself
// and returns their exit code.
func (cf campaignFlags) open(verb string, create bool, stderr io.Writer) (control.Service, int) {
	return openCampaigns(verb, cf.remote, *cf.workspace, create, stderr)
}

func openCampaigns(verb string, remote remoteFlags, workspace string, create bool, stderr io.Writer) (control.Service, int) {
	client, err := remote.client()
	if err != nil {
		fmt.Fprintf(stderr, "amkctl %s: %v\n", verb, err)
		return nil, exitBadInput
	}
	if client != nil {
		return client, exitOK
	}
	local, err := control.OpenLocal(workspace, create, flywheel.Env{AMKVersion: version.String()})
	if err != nil {
		fmt.Fprintf(stderr, "amkctl %s: %v\n", verb, err)
		return nil, exitRejected
	}
	return control.New(local), exitOK
}

// isRemote says whether the campaigns are a scheduler's.
func isRemote(cs control.Service) bool {
	_, remote := cs.(*api.Client)
	return remote
}

// selector is the campaign the positional arguments and flags name.
func (cf campaignFlags) selector(pos []string) control.Selector {
	sel := control.Selector{ID: *cf.id, GPU: *cf.gpu, Device: schedule.Device(*cf.device), Name: *cf.name}
	if len(pos) > 0 {
		sel.Arg, sel.Extra = pos[0], pos[1:]
	}
	return sel
}

// onCampaign opens the campaigns, resolves the one the arguments name and
// runs fn on it, bounded by remoteTimeout.
func (cf campaignFlags) onCampaign(verb string, pos []string, stderr io.Writer, fn func(ctx context.Context, cs control.Service, id string) error) int {
	cs, code := cf.open(verb, false, stderr)
	if cs == nil {
		return code
	}
	ctx, cancel := remoteContext()
	defer cancel()
	id, err := control.Resolve(ctx, cs, cf.selector(pos))
	if err == nil {
		err = fn(ctx, cs, id)
	}
	if err != nil {
		return campaignFail(stderr, verb, err)
	}
	return exitOK
}

// printJSON prints v as indented JSON.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func newStatusCmd() *cobra.Command {
	cmd, cf := campaignVerb("status [CAMPAIGN | MODEL --gpu G | --campaign ID] [--workspace DIR | --server URL] [--json] [--watch [--interval D]]",
		"print a campaign's status (baseline, best, speedup, plateau counter); --watch follows it until it is done")
	watch := cmd.Flags().BoolP("watch", "w", false, "print the status again every --interval until the campaign is done (Ctrl-C stops)")
	interval := cmd.Flags().Duration("interval", 2*time.Second, "with --watch: time between two looks")
	cmd.RunE = runVerb(func(pos []string, stdout, stderr io.Writer) int {
		if *watch {
			return watchStatus(cf, pos, *interval, stdout, stderr)
		}
		return cf.onCampaign("status", pos, stderr, func(ctx context.Context, cs control.Service, id string) error {
			if *cf.jsonOut {
				rep, err := cs.Status(ctx, id)
				if err != nil {
					return err
				}
				return printJSON(stdout, rep)
			}
			text, err := cs.StatusText(ctx, id)
			fmt.Fprint(stdout, text)
			return err
		})
	})
	return cmd
}

// watchStatus is status --watch: on a terminal the screen is redrawn each
// time; otherwise each look is printed after a line with its time (with
// --json, one JSON object per look).
func watchStatus(cf campaignFlags, pos []string, interval time.Duration, stdout, stderr io.Writer) int {
	if interval <= 0 {
		fmt.Fprintf(stderr, "amkctl status: --interval must be positive, not %s\n", interval)
		return exitBadInput
	}
	cs, code := cf.open("status", false, stderr)
	if cs == nil {
		return code
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	resolveCtx, cancel := context.WithTimeout(ctx, remoteTimeout)
	id, err := control.Resolve(resolveCtx, cs, cf.selector(pos))
	cancel()
	if err != nil {
		return campaignFail(stderr, "status", err)
	}
	terminal := runner.IsTerminal(stdout)
	err = control.Watch(ctx, cs, id, interval, func(rep campaign.StatusReport, text string) error {
		switch {
		case *cf.jsonOut:
			return json.NewEncoder(stdout).Encode(rep)
		case terminal:
			fmt.Fprint(stdout, "\x1b[H\x1b[2J") // home, clear the screen
		default:
			fmt.Fprintf(stdout, "--- %s\n", time.Now().UTC().Format(time.RFC3339))
		}
		_, err := fmt.Fprint(stdout, text)
		return err
	})
	if err != nil {
		return campaignFail(stderr, "status", err)
	}
	return exitOK
}

func newNextCmd() *cobra.Command {
	cmd, cf := campaignVerb("next [CAMPAIGN | MODEL --gpu G | --campaign ID] [--workspace DIR | --server URL] [--json]",
		"continue-or-stop decision for a campaign (move-on criteria, hottest region)")
	cmd.RunE = runVerb(func(pos []string, stdout, stderr io.Writer) int {
		return cf.onCampaign("next", pos, stderr, func(ctx context.Context, cs control.Service, id string) error {
			n, err := cs.Next(ctx, id)
			if err != nil {
				return err
			}
			if *cf.jsonOut {
				return printJSON(stdout, n)
			}
			fmt.Fprint(stdout, n.Text())
			return nil
		})
	})
	return cmd
}

func newReportCmd() *cobra.Command {
	cmd, cf := campaignVerb("report [CAMPAIGN | MODEL --gpu G | --campaign ID] [--workspace DIR | --server URL] [--out DIR] [--json]",
		"write a campaign's reports (markdown, JSON, SVG plot); from a scheduler, print the report and save it with --out")
	cmd.Long = `report writes a campaign's reports: the wake-up report (report.md, report.json,
report.svg) and the aggregate report (aggregate_report.md, every experiment).
In a workspace they are written beside the campaign's ledger and the status is
printed. With --server the scheduler writes its copies on its own machine, and
report prints the wake-up report itself here; --out DIR also saves all four
files into DIR on this machine. --json prints the wake-up report as JSON.`
	out := cmd.Flags().String("out", "", "also save the report files into this directory on this machine")
	cmd.RunE = runVerb(func(pos []string, stdout, stderr io.Writer) int {
		return cf.onCampaign("report", pos, stderr, func(ctx context.Context, cs control.Service, id string) error {
			files, err := cs.WriteReport(ctx, id)
			if err != nil {
				return err
			}
			var wake campaign.WakeUp
			if *out != "" {
				if files, wake, err = control.SaveReports(ctx, cs, id, *out); err != nil {
					return err
				}
				fmt.Fprintf(stderr, "saved %s\n", strings.Join(files.Files, ", "))
			} else if *cf.jsonOut || isRemote(cs) {
				if wake, err = cs.Report(ctx, id); err != nil {
					return err
				}
			}
			switch {
			case *cf.jsonOut:
				return printJSON(stdout, wake)
			case isRemote(cs):
				fmt.Fprintln(stdout, wake.Markdown())
				return nil
			}
			text, err := cs.StatusText(ctx, id)
			if err != nil {
				return err
			}
			agg, report := files.Dir, files.Dir
			for _, f := range files.Files {
				switch {
				case hasBase(f, control.AggregateReportFile):
					agg = f
				case hasBase(f, "report.md"):
					report = f
				}
			}
			fmt.Fprintf(stdout, "Report written to %s (wake-up report: %s)\n", agg, report)
			fmt.Fprint(stdout, text)
			return nil
		})
	})
	return cmd
}

// hasBase reports whether a path (in the syntax of the campaigns' machine)
// names base.
func hasBase(path, base string) bool {
	return path == base || strings.HasSuffix(path, "/"+base) || strings.HasSuffix(path, `\`+base)
}

func newRecordCmd() *cobra.Command {
	cmd, cf := campaignVerb("record STATUS [CAMPAIGN | MODEL --gpu G | --campaign ID] [--workspace DIR | --server URL] [--latency-us F] [--pct-roofline F] [--kind K] [--correctness C] [--schedule-id S] [--schedule cfg.json [--ignore-unknown-keys]] [--description D] [--regions attention=0.5,mlp=0.4,lm_head=0.1]",
		"record an outside agent's own experiment into a campaign")
	fs := cmd.Flags()
	latency := fs.Float64("latency-us", -1, "latency in µs (needs correctness PASS); negative: none")
	pct := fs.Float64("pct-roofline", -1, "latency / floor x 100; negative: none")
	bound := fs.Float64("bound-us", -1, "the streamed-bytes floor in µs; negative: none")
	kind := fs.String("kind", "", "latency kind: measured-gpu or predicted")
	correctness := fs.String("correctness", "", "PASS, FAIL, REJECTED, CRASH or TIMEOUT; empty: from STATUS")
	schedID := fs.String("schedule-id", "", "schedule id; empty: computed from --schedule")
	cfgPath := addScheduleFlag(cmd, "the schedule config JSON the experiment used")
	ignoreUnknown := addIgnoreUnknownKeysFlag(cmd)
	desc := fs.String("description", "", "free text")
	source := fs.String("source", "agent", "provenance of the experiment")
	regions := fs.String("regions", "", "critical-path shares, e.g. attention=0.4,mlp=0.5,lm_head=0.1")
	cmd.RunE = runVerb(func(pos []string, stdout, stderr io.Writer) int {
		if len(pos) == 0 {
			fmt.Fprintln(stderr, "amkctl record: STATUS (kept, revert, tried, failed, crash, timeout, rejected) is required")
			return exitBadInput
		}
		opt := func(v float64) *float64 {
			if v < 0 {
				return nil
			}
			return &v
		}
		req := control.RecordRequest{Status: pos[0], Correctness: *correctness, LatencyUS: opt(*latency),
			PctOfRoofline: opt(*pct), BoundUS: opt(*bound), Kind: trial.LatencyKind(*kind), ScheduleID: *schedID,
			Description: *desc, Source: *source}
		if *cfgPath != "" {
			cfg, err := readConfig(*cfgPath, *ignoreUnknown, "record", stderr)
			if err != nil {
				fmt.Fprintln(stderr, "amkctl record:", err)
				return exitBadInput
			}
			req.Config = cfg.JSON()
		}
		if *regions != "" {
			var err error
			if req.Regions, err = parseRegions(*regions); err != nil {
				fmt.Fprintln(stderr, "amkctl record:", err)
				return exitBadInput
			}
		}
		return cf.onCampaign("record", pos[1:], stderr, func(ctx context.Context, cs control.Service, id string) error {
			resp, err := cs.Record(ctx, id, req)
			if err != nil {
				return err
			}
			for _, r := range resp.Rows {
				fmt.Fprintf(stdout, "recorded experiment %d: %s %s\n", r.Experiment, r.Tag, r.Description)
			}
			if *cf.jsonOut {
				return printJSON(stdout, resp.Campaign)
			}
			text, err := cs.StatusText(ctx, id)
			fmt.Fprint(stdout, text)
			return err
		})
	})
	return cmd
}

func parseRegions(s string) (map[string]float64, error) {
	out := map[string]float64{}
	for part := range strings.SplitSeq(s, ",") {
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
		cs, code := openCampaigns("campaigns", remote, *workspace, true, stderr)
		if cs == nil {
			return code
		}
		ctx, cancel := remoteContext()
		defer cancel()
		reports, err := cs.List(ctx)
		if err != nil && reports == nil {
			return campaignFail(stderr, "campaigns", err)
		}
		if err != nil { // some campaigns unreadable: say which, list the others
			fmt.Fprintln(stderr, "amkctl campaigns:", err)
		}
		if *jsonOut {
			if reports == nil {
				reports = []campaign.StatusReport{}
			}
			if err := printJSON(stdout, reports); err != nil {
				return exitInternal
			}
			return exitOK
		}
		if len(reports) == 0 {
			fmt.Fprintf(stdout, "no campaigns %s\n", cs.Where())
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
	fmt.Fprintln(tw, "ID\tSTATUS\tEXPERIMENTS\tKEPT\tBEST US\tKIND\tSPEEDUP\tALERTS")
	anyAlert := false
	for _, r := range reports {
		var alerts []string
		for _, a := range r.Alerts {
			alerts = append(alerts, a.Title)
		}
		anyAlert = anyAlert || len(alerts) > 0
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\n", r.ID, r.Status, r.ExperimentsRun, r.ExperimentsKept,
			optFloat(r.BestUS, "%.3f"), orDash(string(r.BestKind)), optFloat(r.Speedup, "%.3fx"), orDash(strings.Join(alerts, "; ")))
	}
	tw.Flush()
	if anyAlert {
		fmt.Fprintln(stdout, "amkctl status CAMPAIGN says what is wrong and what to do")
	}
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
