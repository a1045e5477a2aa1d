package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/amk-dev/amk/control"
	"github.com/amk-dev/amk/kernels/tune"
	"github.com/amk-dev/amk/trial"
)

// Options configure a Server.
type Options struct {
	// Campaigns is where status, next, report, record, note, campaigns,
	// autoresearch and loop act: the Campaigns of a control.Local (the
	// default of amkctl mcp; loop and autoresearch then run here) or a
	// scheduler's (its api.Client).
	Campaigns control.Service
	// OpenLauncher maps a device ("cpu" or "cuda") to a latency source and
	// the device's name in verdicts; nil serves the CPU cost model only.
	OpenLauncher func(device string) (trial.Launcher, string, error)
	// OpenTuneDevice opens a CUDA device for Loop 1 and returns its release
	// function; nil when the binary has no CUDA support (tune_instruction
	// then answers that it needs a cuda build).
	OpenTuneDevice func(ordinal int) (tune.Device, func() error, error)
	// GPUProbe names the GPU this binary can evaluate on, for doctor; nil
	// when the binary has no CUDA support.
	GPUProbe func(ctx context.Context) (string, error)
	// Workspace is the directory doctor checks; empty: the local
	// workspace's directory, or "workspace".
	Workspace string
	// Version is the server's version in the MCP handshake.
	Version string
	// Logger receives the server's own messages (background runs ending,
	// recovered panics); nil discards them. It must not write to the
	// stdout of a stdio server.
	Logger *slog.Logger
}

// Server is amk's MCP server: one mcp.Server with amk's tools and
// resources, plus the campaign runs it drives on the local workspace.
type Server struct {
	opts   Options
	local  *control.Local // nil on a scheduler
	mcp    *mcp.Server
	models *trial.ModelCache
	log    *slog.Logger

	// base bounds every background run; Close cancels it.
	base context.Context
	stop context.CancelFunc

	mu   sync.Mutex
	runs map[string]*localRun // campaign id -> the run this server drives
	wg   sync.WaitGroup
}

// New builds the server and registers its tools and resources.
func New(o Options) (*Server, error) {
	if o.Campaigns == nil {
		return nil, errors.New("mcpserver: Options.Campaigns is required")
	}
	if o.Version == "" {
		o.Version = "dev"
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	base, stop := context.WithCancel(context.Background())
	s := &Server{opts: o, log: log, models: trial.NewModelCache(0), base: base, stop: stop, runs: map[string]*localRun{}}
	if c, ok := o.Campaigns.(*control.Campaigns); ok {
		s.local, _ = c.Backend().(*control.Local)
	}
	if s.local != nil {
		// Seeded weights are generated once per workspace, then mapped.
		s.models = s.local.NewModelCache()
	}
	s.mcp = mcp.NewServer(&mcp.Implementation{Name: "amk", Title: "amk: safe GPU megakernel schedules", Version: o.Version},
		&mcp.ServerOptions{Instructions: instructions, Logger: slog.New(warnings{log.Handler()})})
	s.addTools()
	s.addResources()
	return s, nil
}

// instructions is what the server tells a client about itself at
// initialisation.
const instructions = `amk searches for the fastest safe schedule of a GPU megakernel.
Schedule search: propose (read the edit surface) -> edit ONE knob of the
schedule_config -> eval (ok=true iff valid and correct) -> keep only a correct
config with a >= 1% lower latency -> record the outcome -> next (continue or stop).
loop runs that keep/revert loop for you; autoresearch runs it in the background
(status/next/report to watch it, cancel to end the run). Kernel tuning (one micro-kernel's
-D knobs on a GPU): tune_instruction. Never edit kernel code, the VM or the
validator through a schedule; a latency exists only for a correct config, and
latency_kind says predicted (cost model) or measured-gpu. The schedule config's
JSON Schema is the resource amk://schema/schedule_config.json. The reference's
tool names (amk_propose, amk_eval, amk_loop, amk_autoresearch,
amk_orchestrate_status|next|report|record, amk_doctor) name the same tools.`

// warnings passes on the SDK's warnings and errors only: its info lines
// (a session connected, disconnected) are noise on an agent's stderr.
type warnings struct{ slog.Handler }

func (w warnings) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn && w.Handler.Enabled(ctx, l)
}

func (w warnings) WithAttrs(attrs []slog.Attr) slog.Handler {
	return warnings{w.Handler.WithAttrs(attrs)}
}

func (w warnings) WithGroup(name string) slog.Handler { return warnings{w.Handler.WithGroup(name)} }

// MCP is the underlying SDK server (for transports: Run, Connect, the
// streamable HTTP handler).
func (s *Server) MCP() *mcp.Server { return s.mcp }

// Run serves one session on t until the client disconnects or ctx ends.
func (s *Server) Run(ctx context.Context, t mcp.Transport) error { return s.mcp.Run(ctx, t) }

// Close ends the background runs this server drives (their campaigns stay
// resumable) and waits for them.
func (s *Server) Close() error {
	s.stop()
	s.wg.Wait()
	return nil
}

// safe turns a panic of a handler into a tool error that names the tool,
// so one bad call never takes the server down.
func safe[In, Out any](tool string, log *slog.Logger, h mcp.ToolHandlerFor[In, Out]) mcp.ToolHandlerFor[In, Out] {
	return func(ctx context.Context, req *mcp.CallToolRequest, in In) (res *mcp.CallToolResult, out Out, err error) {
		defer func() {
			if r := recover(); r != nil {
				log.Error("tool panicked", "tool", tool, "panic", r)
				var zero Out
				res, out, err = nil, zero, fmt.Errorf("%s: internal error: %v (a bug: please report it with the arguments)", tool, r)
			}
		}()
		return h(ctx, req, in)
	}
}

// referenceNames are the names the reference system's MCP server (seed
// 001: AutoMegaKernel's) gives these tools. Each is served as well, by the
// same handler, so a prompt or an agent set-up written for the reference
// finds its tools; the arguments take the reference's names too (config
// for schedule, pct_roofline for pct_of_roofline, device auto).
var referenceNames = map[string]string{
	"doctor":       "amk_doctor",
	"propose":      "amk_propose",
	"eval":         "amk_eval",
	"loop":         "amk_loop",
	"autoresearch": "amk_autoresearch",
	"status":       "amk_orchestrate_status",
	"next":         "amk_orchestrate_next",
	"report":       "amk_orchestrate_report",
	"record":       "amk_orchestrate_record",
}

// ReferenceName is the reference's name of a tool, or "" when the
// reference has no such tool.
func ReferenceName(tool string) string { return referenceNames[tool] }

// names are the names a tool is served under: its own and, where the
// reference has one, the reference's, with the description saying so.
func names(name, description string) [][2]string {
	out := [][2]string{{name, description}}
	if ref := referenceNames[name]; ref != "" {
		out = append(out, [2]string{ref, "The reference's (AutoMegaKernel's) name of amk's " + name + " tool. " + description})
	}
	return out
}

// addTool registers a tool behind safe. The input schema is inferred from
// In; the answer is the JSON of Out, with no output schema: the answers
// are the verdicts and reports amkctl prints, whose nulls (a latency
// withheld, a best config not found yet) an inferred schema would refuse.
func addTool[In, Out any](s *Server, name, description string, h mcp.ToolHandlerFor[In, Out]) {
	answer := func(ctx context.Context, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, any, error) {
		res, out, err := h(ctx, req, in)
		if err != nil {
			return res, nil, err
		}
		return res, out, nil
	}
	for _, n := range names(name, description) {
		mcp.AddTool(s.mcp, &mcp.Tool{Name: n[0], Description: n[1]}, safe(n[0], s.log, answer))
	}
}

// addSchemaTool registers a tool whose input schema is given (schema)
// rather than inferred from In. The server does not hold the arguments to
// the schema, it decodes them into In (unknown arguments refused): the
// schema tells a client what a well-formed call is, and a value it refuses
// inside a schedule config reaches the handler, whose verdict says what is
// wrong with it (seed 001: eval answers a malformed config with valid=false
// and the reason, never an error).
func addSchemaTool[In, Out any](s *Server, name, description string, schema map[string]any, h mcp.ToolHandlerFor[In, Out]) {
	for _, n := range names(name, description) {
		handler := safe(n[0], s.log, h)
		s.mcp.AddTool(&mcp.Tool{Name: n[0], Description: n[1], InputSchema: schema},
			func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				var in In
				if args := req.Params.Arguments; len(args) > 0 && string(args) != "null" {
					dec := json.NewDecoder(bytes.NewReader(args))
					dec.DisallowUnknownFields()
					if err := dec.Decode(&in); err != nil {
						return toolError(fmt.Errorf("arguments: %v", err)), nil
					}
				}
				res, out, err := handler(ctx, req, in)
				if err != nil {
					return toolError(err), nil
				}
				data, err := json.Marshal(out)
				if err != nil {
					return nil, fmt.Errorf("%s: encoding the answer: %w", n[0], err)
				}
				if res == nil {
					res = &mcp.CallToolResult{}
				}
				res.StructuredContent = json.RawMessage(data)
				if res.Content == nil {
					res.Content = []mcp.Content{&mcp.TextContent{Text: string(data)}}
				}
				return res, nil
			})
	}
}

// toolError is a tool result that reports err.
func toolError(err error) *mcp.CallToolResult {
	res := &mcp.CallToolResult{}
	res.SetError(err)
	return res
}

// progress returns a function that sends progress notifications for the
// request, or does nothing when the client asked for none.
func progress(ctx context.Context, req *mcp.CallToolRequest) func(done, total float64, message string) {
	if req == nil || req.Params == nil || req.Session == nil {
		return func(float64, float64, string) {}
	}
	token := req.Params.GetProgressToken()
	if token == nil {
		return func(float64, float64, string) {}
	}
	return func(done, total float64, message string) {
		_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: done, Total: total, Message: message})
	}
}
