package launch

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/kernels"
	"github.com/amk-dev/amk/tensor"
)

// ProtocolVersion is the version of the parent/child frames.
const ProtocolVersion = 1

// DefaultMaxFrame bounds one frame (a line of JSON).
const DefaultMaxFrame = 1 << 30

// The supervised child speaks newline-delimited JSON on stdin/stdout: one
// request frame in, one response frame out, strictly in turn. Everything
// else the child prints goes to stderr.
//
//	-> {"id": 3, "op": "run", "body": {...}}
//	<- {"id": 3, "ok": true, "body": {...}}
//	<- {"id": 3, "ok": false, "error": {"class": "crash", "phase": "run", "message": "..."}}
type requestFrame struct {
	ID   uint64          `json:"id"`
	Op   string          `json:"op"`
	Body json.RawMessage `json:"body,omitempty"`
}

type responseFrame struct {
	ID    uint64          `json:"id"`
	OK    bool            `json:"ok"`
	Body  json.RawMessage `json:"body,omitempty"`
	Error *RemoteError    `json:"error,omitempty"`
	Exit  bool            `json:"exit,omitempty"` // the child exits after this answer
}

// Ops of the protocol.
const (
	OpHello    = "hello"
	OpLoad     = "load"
	OpUpdate   = "update"
	OpRun      = "run"
	OpTime     = "time"
	OpRead     = "read"
	OpUnload   = "unload"
	OpShutdown = "shutdown"
)

// RemoteError is a failure reported across the process boundary: a class
// (crash, timeout, infra, rejected), the phase, and a message.
type RemoteError struct {
	Class   string `json:"class"`
	Phase   string `json:"phase,omitempty"`
	Message string `json:"message"`
}

func (e *RemoteError) Error() string {
	if e.Phase != "" {
		return e.Class + " (" + e.Phase + "): " + e.Message
	}
	return e.Class + ": " + e.Message
}

// Fatal marks a handler error after which the child must exit (a sticky
// device error poisons the CUDA context): Serve answers the request, then
// returns the error so that the process ends and the supervisor restarts it.
type Fatal struct{ Err error }

func (f *Fatal) Error() string { return "fatal: " + f.Err.Error() }
func (f *Fatal) Unwrap() error { return f.Err }

// Handler answers one request of the child.
type Handler interface {
	Handle(ctx context.Context, op string, body json.RawMessage) (any, error)
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, op string, body json.RawMessage) (any, error)

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, op string, body json.RawMessage) (any, error) {
	return f(ctx, op, body)
}

func remote(err error, phase string) *RemoteError {
	var re *RemoteError
	if errors.As(err, &re) {
		return re
	}
	return &RemoteError{Class: ClassCrash, Phase: phase, Message: err.Error()}
}

// Serve is the child's loop: it reads request frames from r until EOF or a
// shutdown request and writes one response frame per request to w. A
// handler panic or a Fatal error is answered and then ends Serve with an
// error (the child must exit non-zero).
func Serve(ctx context.Context, r io.Reader, w io.Writer, h Handler) error {
	in := bufio.NewScanner(r)
	in.Buffer(make([]byte, 64<<10), DefaultMaxFrame)
	out := bufio.NewWriter(w)
	write := func(f responseFrame) error {
		line, err := json.Marshal(f)
		if err != nil {
			line, _ = json.Marshal(responseFrame{ID: f.ID, Error: &RemoteError{Class: ClassCrash, Message: "encoding response: " + err.Error()}})
		}
		if _, err := out.Write(append(line, '\n')); err != nil {
			return err
		}
		return out.Flush()
	}
	for in.Scan() {
		var req requestFrame
		if err := json.Unmarshal(in.Bytes(), &req); err != nil {
			if werr := write(responseFrame{Error: &RemoteError{Class: ClassCrash, Phase: "protocol", Message: "malformed request frame: " + err.Error()}}); werr != nil {
				return werr
			}
			continue
		}
		if req.Op == OpShutdown {
			return write(responseFrame{ID: req.ID, OK: true})
		}
		body, err := callHandler(ctx, h, req)
		resp := responseFrame{ID: req.ID, OK: err == nil}
		if err == nil {
			data, merr := json.Marshal(body)
			if merr != nil {
				resp.OK, err = false, merr
			} else {
				resp.Body = data
			}
		}
		var fatal *Fatal
		if err != nil {
			resp.Error = remote(err, req.Op)
			resp.Exit = errors.As(err, &fatal)
		}
		if werr := write(resp); werr != nil {
			return werr
		}
		if resp.Exit {
			return err
		}
	}
	return in.Err()
}

func callHandler(ctx context.Context, h Handler, req requestFrame) (body any, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = &Fatal{Err: &RemoteError{Class: ClassCrash, Phase: req.Op, Message: fmt.Sprintf("panic in the launcher child: %v", p)}}
		}
	}()
	return h.Handle(ctx, req.Op, req.Body)
}

// ---- request and response bodies -------------------------------------------------------------

// HelloResponse identifies the child and its device.
type HelloResponse struct {
	Protocol int    `json:"protocol"`
	PID      int    `json:"pid"`
	Device   Info   `json:"device"`
	Sources  string `json:"sources"` // kernels.SourceHash of the sources it compiles
}

// WeightSource tells the child where the weights of a program come from.
// "inline" carries them in the frame (small models, tests); "seeded" and
// "safetensors" are resolved by the child's WeightProvider (the same seeded
// init or files the reference VM uses: Paths are a checkpoint's shards, or
// its one file).
type WeightSource struct {
	Kind    string                `json:"kind"`
	Model   string                `json:"model,omitempty"`
	Seed    int64                 `json:"seed,omitempty"`
	Paths   []string              `json:"paths,omitempty"`
	Tensors map[string]WireTensor `json:"tensors,omitempty"` // inline: by buffer source (or name)
}

// LoadRequest loads one program under a caller-chosen handle name.
type LoadRequest struct {
	Handle     string          `json:"handle"`
	Program    json.RawMessage `json:"program"` // ir JSON (ir.Encode)
	Variant    kernels.Variant `json:"variant,omitempty"`
	Weights    WeightSource    `json:"weights"`
	WatchdogNS uint64          `json:"watchdog_ns,omitempty"`
	Unchecked  bool            `json:"unchecked,omitempty"`
}

// LoadResponse reports how the program was prepared.
type LoadResponse struct {
	Handle string   `json:"handle"`
	Launch LoadInfo `json:"launch"`
	Notes  []string `json:"notes,omitempty"`
}

// UpdateRequest replaces a loaded program's instruction params (same tasks,
// e.g. a new decode position).
type UpdateRequest struct {
	Handle  string          `json:"handle"`
	Program json.RawMessage `json:"program"`
}

// RunRequest launches a loaded program once.
type RunRequest struct {
	Handle string                `json:"handle"`
	Inputs map[string]WireTensor `json:"inputs,omitempty"` // IO inputs / KV caches by buffer name
	Read   []string              `json:"read,omitempty"`   // extra buffers to read back (IO outputs always are)
}

// RunResponse is the outcome of one launch.
type RunResponse struct {
	Status  Status                `json:"status"`
	Message string                `json:"message,omitempty"`
	Diag    *kernels.Diag         `json:"diag,omitempty"`
	Outputs map[string]WireTensor `json:"outputs,omitempty"`
}

// ReadRequest reads buffers of a loaded program without launching it: what
// its last launch left there. Read names the buffers; empty means the IO
// outputs. The answer is a RunResponse with status OK.
type ReadRequest struct {
	Handle string   `json:"handle"`
	Read   []string `json:"read,omitempty"`
}

// TimeRequest times a candidate, optionally interleaved with an incumbent.
type TimeRequest struct {
	Candidate string `json:"candidate"`
	Incumbent string `json:"incumbent,omitempty"`
	Warmup    int    `json:"warmup"`
	Samples   int    `json:"samples"`
}

// UnloadRequest frees a handle.
type UnloadRequest struct {
	Handle string `json:"handle"`
}

// WireTensor is a tensor in device byte layout (kernels.EncodeTensor).
type WireTensor struct {
	DType string `json:"dtype"`
	Shape []int  `json:"shape"`
	Data  []byte `json:"data"`
}

// ToWire encodes a host tensor in its own dtype.
func ToWire(t *tensor.Tensor) (WireTensor, error) {
	b := &ir.Buffer{Name: "wire", DType: t.DType, Shape: t.Shape}
	data, err := kernels.EncodeTensor(b, t)
	if err != nil {
		return WireTensor{}, err
	}
	return WireTensor{DType: t.DType.String(), Shape: append([]int(nil), t.Shape...), Data: data}, nil
}

// Tensor decodes a wire tensor.
func (w WireTensor) Tensor() (*tensor.Tensor, error) {
	dt, err := ir.ParseDType(w.DType)
	if err != nil {
		return nil, err
	}
	for _, d := range w.Shape {
		if d < 0 {
			return nil, fmt.Errorf("negative dimension in %v", w.Shape)
		}
	}
	return kernels.DecodeTensor(&ir.Buffer{Name: "wire", DType: dt, Shape: w.Shape}, w.Data)
}
