package main

import (
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/amk-dev/amk/control"
	"github.com/amk-dev/amk/internal/api"
)

func init() {
	addVerb(groupFleet, newWorkersCmd)
	addVerb(groupFleet, newQueuesCmd)
}

// schedulerOnlyVerb builds a verb that exists only against a scheduler; its
// body gets the client and the --json setting.
func schedulerOnlyVerb(use, short string, body func(c *api.Client, jsonOut bool, stdout, stderr io.Writer) int) *cobra.Command {
	cmd := &cobra.Command{Use: use, Short: short, Args: cobra.NoArgs}
	remote := addRemoteFlags(cmd)
	jsonOut := addJSONFlags(cmd, "print JSON")
	verb := cmd.Name()
	cmd.RunE = runVerb(func(_ []string, stdout, stderr io.Writer) int {
		c, err := remote.client()
		if err != nil {
			fmt.Fprintf(stderr, "amkctl %s: %v\n", verb, err)
			return exitBadInput
		}
		if c == nil {
			fmt.Fprintf(stderr, "amkctl %s: needs a scheduler: --server URL or $%s\n", verb, envServer)
			return exitBadInput
		}
		return body(c, *jsonOut, stdout, stderr)
	})
	return cmd
}

func newWorkersCmd() *cobra.Command {
	return schedulerOnlyVerb("workers --server URL [--json]", "list a scheduler's live gpuworkers (needs --server)", runWorkers)
}

func newQueuesCmd() *cobra.Command {
	return schedulerOnlyVerb("queues --server URL [--json]", "show a scheduler's queues: depth, latency, processed/failed, outcomes received (needs --server)", runQueues)
}

func runWorkers(c *api.Client, jsonOut bool, stdout, stderr io.Writer) int {
	ctx, cancel := remoteContext()
	defer cancel()
	ws, err := c.Workers(ctx)
	if err != nil {
		return campaignFail(stderr, "workers", err)
	}
	if jsonOut {
		if ws == nil {
			ws = []control.Worker{}
		}
		if err := printJSON(stdout, ws); err != nil {
			return exitInternal
		}
		return exitOK
	}
	if len(ws) == 0 {
		fmt.Fprintf(stdout, "no live workers on the scheduler at %s\n", c.Server())
		return exitOK
	}
	now := time.Now()
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "WORKER\tTARGET\tDEVICE\tTRIALS\tCURRENT\tUP\tLAST SEEN")
	for _, w := range ws {
		cur := orDash(w.Current)
		if w.CurrentSince != nil {
			cur += fmt.Sprintf(" (%s)", now.Sub(*w.CurrentSince).Round(time.Second))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s ago\n", w.ID, w.Target, w.Device, w.Trials, cur,
			now.Sub(w.Started).Round(time.Second), now.Sub(w.Heartbeat).Round(time.Second))
	}
	tw.Flush()
	return exitOK
}

func runQueues(c *api.Client, jsonOut bool, stdout, stderr io.Writer) int {
	ctx, cancel := remoteContext()
	defer cancel()
	qs, err := c.Queues(ctx)
	if err != nil {
		return campaignFail(stderr, "queues", err)
	}
	if jsonOut {
		if qs == nil {
			qs = []control.Queue{}
		}
		if err := printJSON(stdout, qs); err != nil {
			return exitInternal
		}
		return exitOK
	}
	if len(qs) == 0 {
		fmt.Fprintf(stdout, "no queues yet on the scheduler at %s\n", c.Server())
		return exitOK
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "QUEUE\tPENDING\tACTIVE\tRETRY\tARCHIVED\tLATENCY\tPROCESSED\tFAILED\tRECEIVED")
	for _, q := range qs {
		received := "-"
		if q.OutcomesReceived != nil {
			received = strconv.FormatInt(*q.OutcomesReceived, 10)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%.3fs\t%d\t%d\t%s\n", q.Queue, q.Pending, q.Active, q.Retry, q.Archived,
			q.LatencySeconds, q.ProcessedTotal, q.FailedTotal, received)
	}
	tw.Flush()
	fmt.Fprintf(stdout, "\n%s\n", control.QueueCountsNote)
	return exitOK
}
