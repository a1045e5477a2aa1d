package main

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/amk-dev/amk/internal/api"
)

func init() {
	register(command{name: "workers", summary: "list a scheduler's live gpuworkers (needs --server)", run: runWorkers})
	register(command{name: "queues", summary: "show a scheduler's queues: depth, latency, processed/failed (needs --server)", run: runQueues})
	remoteVerbs["workers"], remoteVerbs["queues"] = true, true
}

// schedulerOnly parses a verb that exists only against a scheduler.
func schedulerOnly(verb string, args []string, stderr io.Writer) (*api.Client, bool, int) {
	fs := newFlagSet(verb, verb+" --server URL [--json]", stderr)
	remote := addRemoteFlags(fs)
	jsonOut := fs.Bool("json", false, "print JSON")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return nil, false, flagExit(err)
	}
	if len(pos) > 0 {
		fmt.Fprintf(stderr, "amkctl %s: unexpected arguments %q\n", verb, pos)
		return nil, false, 2
	}
	c, err := remote.client()
	if err != nil {
		fmt.Fprintf(stderr, "amkctl %s: %v\n", verb, err)
		return nil, false, 2
	}
	if c == nil {
		fmt.Fprintf(stderr, "amkctl %s: needs a scheduler: --server URL or $%s\n", verb, envServer)
		return nil, false, 2
	}
	return c, *jsonOut, -1
}

func runWorkers(args []string, stdout, stderr io.Writer) int {
	c, jsonOut, code := schedulerOnly("workers", args, stderr)
	if code >= 0 {
		return code
	}
	ctx, cancel := remoteContext()
	defer cancel()
	ws, err := c.Workers(ctx)
	if err != nil {
		return remoteFail(stderr, "workers", err)
	}
	if jsonOut {
		if ws == nil {
			ws = []api.Worker{}
		}
		return printJSON(stdout, ws)
	}
	if len(ws) == 0 {
		fmt.Fprintf(stdout, "no live workers on the scheduler at %s\n", c.Server())
		return 0
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
	return 0
}

func runQueues(args []string, stdout, stderr io.Writer) int {
	c, jsonOut, code := schedulerOnly("queues", args, stderr)
	if code >= 0 {
		return code
	}
	ctx, cancel := remoteContext()
	defer cancel()
	qs, err := c.Queues(ctx)
	if err != nil {
		return remoteFail(stderr, "queues", err)
	}
	if jsonOut {
		if qs == nil {
			qs = []api.Queue{}
		}
		return printJSON(stdout, qs)
	}
	if len(qs) == 0 {
		fmt.Fprintf(stdout, "no queues yet on the scheduler at %s\n", c.Server())
		return 0
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "QUEUE\tPENDING\tACTIVE\tRETRY\tARCHIVED\tLATENCY\tPROCESSED\tFAILED")
	for _, q := range qs {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%.3fs\t%d\t%d\n", q.Queue, q.Pending, q.Active, q.Retry, q.Archived,
			q.LatencySeconds, q.ProcessedTotal, q.FailedTotal)
	}
	tw.Flush()
	return 0
}
