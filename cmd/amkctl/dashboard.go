package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/amk-dev/amk/control"
	"github.com/amk-dev/amk/flywheel"
	"github.com/amk-dev/amk/inputfile"
	"github.com/amk-dev/amk/internal/version"
	"github.com/amk-dev/amk/internal/web"
)

func init() { addVerb(groupCampaign, newDashboardCmd) }

func newDashboardCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dashboard [--workspace DIR] [--listen 127.0.0.1:8090] [--token-file F]",
		Short: "serve the web view of a local workspace's campaigns",
		Long: "Serves the web view (the scheduler serves the same pages under /ui/) of the campaigns of a\n" +
			"workspace on this machine: their status, best latency against the streamed-bytes floor, live, and results.\n" +
			"Reading needs nothing. Pause, resume and stop need a token, from --token-file or $" + envToken + ";\n" +
			"without one the pages are read-only. A campaign that amkctl autoresearch is driving refuses\n" +
			"them (stop that process with Ctrl-C instead). Runs until interrupted.",
		Args: cobra.NoArgs,
	}
	fs := cmd.Flags()
	workspace := fs.String("workspace", "workspace", "workspace directory")
	listen := fs.String("listen", "127.0.0.1:8090", "address to serve on (keep it on loopback: reads are open)")
	tokenFile := fs.String("token-file", "", "file holding the token the actions need (default $"+envToken+"; none: read-only)")
	cmd.RunE = runVerb(func(_ []string, stdout, stderr io.Writer) int {
		token := strings.TrimSpace(os.Getenv(envToken))
		if *tokenFile != "" {
			data, err := inputfile.ReadFile(*tokenFile, maxTokenFileBytes)
			if err != nil {
				fmt.Fprintf(stderr, "amkctl dashboard: --token-file: %v\n", err)
				return exitBadInput
			}
			token = strings.TrimSpace(string(data))
		}
		local, err := control.OpenLocal(*workspace, false, flywheel.Env{AMKVersion: version.String()})
		if err != nil {
			fmt.Fprintf(stderr, "amkctl dashboard: %v\n", err)
			return exitBadInput
		}
		h, err := web.Handler(web.Options{Campaigns: control.New(local), Token: token, Where: "workspace " + local.Workspace.Dir})
		if err != nil {
			fmt.Fprintf(stderr, "amkctl dashboard: internal error: %v\n", err)
			return exitInternal
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		site := web.Site(h, http.NotFoundHandler(), nil, "")
		err = web.Serve(ctx, *listen, site, func(url string) {
			mode := "actions need the token"
			if token == "" {
				mode = "read-only (no token: set $" + envToken + " or --token-file for pause/resume/stop)"
			}
			fmt.Fprintf(stdout, "amkctl dashboard: serving %s at %s; %s; Ctrl-C stops\n", local.Where(), url, mode)
		})
		if err != nil {
			fmt.Fprintf(stderr, "amkctl dashboard: %v\n", err)
			return exitRejected
		}
		return exitOK
	})
	return cmd
}
