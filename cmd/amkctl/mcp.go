package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/amk-dev/amk/internal/mcpserver"
	"github.com/amk-dev/amk/internal/version"
	"github.com/amk-dev/amk/schedule"
	"github.com/amk-dev/amk/trial"
)

func init() { addVerb(groupCampaign, newMCPCmd) }

func newMCPCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "mcp [--workspace DIR | --server URL] [--http 127.0.0.1:PORT]",
		Short: "serve amk's loops to coding agents over MCP (stdio; --http: streamable HTTP on loopback)",
		Long: `mcp serves amk's tools to a coding agent over the Model Context Protocol:
doctor, propose, eval, loop, tune_instruction, autoresearch, cancel, status,
next, report, record, note, campaigns and trial (and, the same tools, under
AMK's names: amk_doctor, amk_propose, amk_eval, amk_loop, amk_autoresearch,
amk_orchestrate_status|next|report|record), and the resources
amk://campaigns/ID/report.md, amk://campaigns/ID/results.tsv and
amk://schema/schedule_config.json (the schedule config's JSON Schema).
It speaks on stdin/stdout (register "amkctl mcp" in the agent's .mcp.json);
with --http ADDR it serves streamable HTTP on a loopback address instead, to
clients that send the scheduler's token as a bearer token. Campaigns live in
the local workspace, or on a scheduler with --server. Messages go to stderr.
AGENTS.md at the repository root says how an agent uses the tools.`,
	}
	remote := addRemoteFlags(cmd)
	fs := cmd.Flags()
	workspace := fs.String("workspace", "workspace", "workspace directory (created when missing)")
	httpAddr := fs.String("http", "", "serve streamable HTTP on this loopback address (e.g. 127.0.0.1:8765) instead of stdio; needs the token")
	cmd.RunE = runVerb(func(args []string, stdout, stderr io.Writer) int {
		if len(args) != 0 {
			fmt.Fprintln(stderr, "amkctl mcp: takes no arguments")
			return exitBadInput
		}
		if *httpAddr != "" {
			if err := mcpserver.CheckLoopback(*httpAddr); err != nil {
				fmt.Fprintln(stderr, "amkctl mcp:", err)
				return exitBadInput
			}
		}
		cs, code := openCampaigns("mcp", remote, *workspace, true, stderr)
		if cs == nil {
			return code
		}
		opts := mcpserver.Options{
			Campaigns: cs,
			OpenLauncher: func(device string) (trial.Launcher, string, error) {
				if d, err := schedule.ParseDevice(device); err == nil && d == schedule.DeviceEmu {
					return nil, "", errors.New("emu is not offered through MCP (its tools name no GPU target for the emulator): run amkctl eval or autoresearch --device emu")
				}
				l, d, err := launcherFor(device, "", stderr)
				return l, string(d), err
			},
			OpenTuneDevice: openTuneDevice,
			GPUProbe:       gpuProbe(),
			Workspace:      *workspace,
			Version:        version.String(),
			Logger:         slog.New(slog.NewTextHandler(stderr, nil)),
		}
		srv, err := mcpserver.New(opts)
		if err != nil {
			fmt.Fprintln(stderr, "amkctl mcp:", err)
			return exitInternal
		}
		defer srv.Close()
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		if *httpAddr == "" {
			if err := srv.Run(ctx, &mcp.StdioTransport{MaxLineLength: mcpserver.MaxMessageBytes}); err != nil && ctx.Err() == nil && !errors.Is(err, io.EOF) {
				fmt.Fprintln(stderr, "amkctl mcp:", err)
				return exitRejected
			}
			return exitOK
		}
		token, err := remote.resolveToken()
		if err == nil && token == "" {
			token = workspaceToken(*workspace)
		}
		if err != nil {
			fmt.Fprintln(stderr, "amkctl mcp:", err)
			return exitBadInput
		}
		handler, err := srv.HTTPHandler(token)
		if err != nil {
			fmt.Fprintln(stderr, "amkctl mcp:", err)
			return exitBadInput
		}
		return serveMCPHTTP(ctx, *httpAddr, handler, stderr)
	})
	return cmd
}

// workspaceToken is the token a scheduler generated in the workspace, if
// any.
func workspaceToken(workspace string) string {
	data, err := os.ReadFile(filepath.Join(workspace, "api-token"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(data))
}

// serveMCPHTTP serves handler on addr until ctx ends.
func serveMCPHTTP(ctx context.Context, addr string, handler http.Handler, stderr io.Writer) int {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(stderr, "amkctl mcp:", err)
		return exitRejected
	}
	hs := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(stderr, "amkctl mcp: serving MCP (streamable HTTP) on http://%s\n", ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		fmt.Fprintln(stderr, "amkctl mcp:", err)
		return exitRejected
	case <-ctx.Done():
	}
	shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = hs.Shutdown(shut)
	return exitOK
}
