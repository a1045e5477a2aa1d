package gpu

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"

	"github.com/amk-dev/amk/kernels/build"
	"github.com/amk-dev/amk/kernels/launch"
)

// ChildCommand is the name of the hidden subcommand, in the gpuworker and in
// amkctl, that runs the launcher child (ChildMain).
const ChildCommand = "launcher-child"

// ChildConfig says how to start the launcher child of one device.
type ChildConfig struct {
	// Executable and Subcommand run the child: typically os.Executable()
	// and []string{ChildCommand}.
	Executable string
	Subcommand []string
	Ordinal    int
	Toolchain  build.Toolchain
	CacheDir   string
	// Log receives the child's stderr (build chatter, crash reports).
	Log io.Writer
}

// Args are the child's command-line arguments after the subcommand.
func (c ChildConfig) Args() []string {
	args := []string{"--device", strconv.Itoa(c.Ordinal), "--nvcc", c.Toolchain.NVCC, "--cache", c.CacheDir}
	for _, a := range c.Toolchain.HostArgs {
		args = append(args, "--nvcc-arg="+a)
	}
	return args
}

// Open starts the supervised launcher child of one device and returns its
// Launcher; Close stops the child.
func Open(ctx context.Context, cc ChildConfig, opts Options) (*Launcher, error) {
	if cc.Executable == "" {
		return nil, errors.New("launcher child: no executable")
	}
	args := append(append([]string(nil), cc.Subcommand...), cc.Args()...)
	sup := launch.NewSupervisor(launch.SupervisorConfig{
		Command: func() *exec.Cmd { return exec.Command(cc.Executable, args...) },
		Log:     cc.Log,
	})
	if opts.Generation == nil {
		opts.Generation = sup.Generation
	}
	l, err := New(ctx, launch.Client{S: sup}, opts)
	if err != nil {
		_ = sup.Close()
		return nil, err
	}
	l.close = sup.Close
	return l, nil
}

// ChildMain is the body of the hidden launcher subcommand: it opens CUDA
// device --device and serves launch protocol frames on stdin/stdout until
// EOF or shutdown, resolving seeded and safetensors weights with a
// WeightProvider. It returns the process exit code: 0 after a clean
// shutdown, 2 for bad arguments or a build without CUDA, 1 otherwise.
func ChildMain(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet(ChildCommand, flag.ContinueOnError)
	fs.SetOutput(stderr)
	ordinal := fs.Int("device", 0, "CUDA device ordinal")
	nvcc := fs.String("nvcc", "nvcc", "nvcc executable")
	cache := fs.String("cache", "", "shared kernel build cache directory")
	var hostArgs multiFlag
	fs.Var(&hostArgs, "nvcc-arg", "extra trusted nvcc argument (repeatable)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 || *ordinal < 0 || *cache == "" {
		fmt.Fprintln(stderr, ChildCommand+": want --device N (>= 0) and --cache DIR and no positional arguments")
		return 2
	}
	err := launch.RunChild(ctx, launch.ChildConfig{Ordinal: *ordinal, CacheDir: *cache,
		Toolchain: build.Toolchain{NVCC: *nvcc, HostArgs: hostArgs}, Weights: &WeightProvider{}, Stdin: stdin, Stdout: stdout})
	switch {
	case err == nil:
		return 0
	case errors.Is(err, launch.ErrNoCUDA):
		fmt.Fprintln(stderr, ChildCommand+":", err)
		return 2
	default:
		fmt.Fprintln(stderr, ChildCommand+":", err)
		return 1
	}
}

// multiFlag collects a repeatable string flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, " ") }
func (m *multiFlag) Set(s string) error { *m = append(*m, s); return nil }

// DriverRelease renders a CUDA driver version (12080) as "12.8".
func DriverRelease(v int) string {
	if v <= 0 {
		return ""
	}
	return fmt.Sprintf("%d.%d", v/1000, v%1000/10)
}
