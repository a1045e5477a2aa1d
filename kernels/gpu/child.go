package gpu

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/amk-dev/amk/kernels"
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
	// Emulate, when set, is the GPU target the child's CPU emulator
	// stands in for (launch.OpenEmulator) instead of CUDA device Ordinal;
	// Seed is its first launch's schedule seed (later launches count up
	// from it: 0 resumes threads round robin, others shuffle them).
	Emulate string
	Seed    uint64
}

// Args are the child's command-line arguments after the subcommand.
func (c ChildConfig) Args() []string {
	args := []string{"--device", strconv.Itoa(c.Ordinal), "--nvcc", c.Toolchain.NVCC, "--cache", c.CacheDir}
	for _, a := range c.Toolchain.HostArgs {
		args = append(args, "--nvcc-arg="+a)
	}
	if c.Emulate != "" {
		args = append(args, "--emulate", c.Emulate, "--seed", strconv.FormatUint(c.Seed, 10))
		if c.Toolchain.CXX != "" {
			args = append(args, "--cxx", c.Toolchain.CXX)
		}
		for _, a := range c.Toolchain.CXXArgs {
			args = append(args, "--cxx-arg="+a)
		}
		if c.Toolchain.EmulatorOpt != "" {
			args = append(args, "--emu-opt", c.Toolchain.EmulatorOpt)
		}
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
	if cc.Emulate != "" && opts.RunTimeout <= 0 { // the emulator's own bound first, with room to report
		opts.RunTimeout = launch.DefaultEmulatorTimeout + time.Minute
	}
	l, err := New(ctx, launch.Client{S: sup}, opts)
	if err != nil {
		_ = sup.Close()
		return nil, err
	}
	l.close = sup.Close
	return l, nil
}

// OpenLocal starts this executable's supervised launcher child (its hidden
// ChildCommand) for CUDA device ordinal or, with emulate set, for the CPU
// emulator that stands in for that target, with the operator's toolchain
// (build.ToolchainFromEnv: AMK_NVCC, AMK_NVCC_HOST_ARGS; AMK_CXX,
// AMK_CXX_ARGS and AMK_EMU_OPT for the emulator) and the host's build cache
// (build.CacheDirFromEnv), and returns its Launcher; the child's stderr goes
// to log. For the emulator, a target without a CUDA record or a missing C++
// compiler is refused here, before any child starts.
func OpenLocal(ctx context.Context, ordinal int, emulate string, log io.Writer) (*Launcher, error) {
	tc := build.ToolchainFromEnv()
	if err := kernels.CheckSources(); err != nil {
		return nil, err
	}
	if emulate != "" {
		if _, err := launch.EmulatorInfo(emulate); err != nil {
			return nil, err
		}
		if _, err := (&build.Builder{Toolchain: tc}).CompilerVersion(ctx); err != nil {
			return nil, err
		}
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cache, err := build.CacheDirFromEnv()
	if err != nil {
		return nil, err
	}
	opts, err := OptionsFromEnv()
	if err != nil {
		return nil, err
	}
	return Open(ctx, ChildConfig{Executable: exe, Subcommand: []string{ChildCommand}, Ordinal: ordinal, Toolchain: tc,
		CacheDir: cache, Log: log, Emulate: emulate}, opts)
}

// Environment variables of the launcher's per-request bounds (Options), as
// Go durations ("20s", "2m"); unset keeps the defaults. A GPU visit sets
// them to tens of seconds, so that a hung load, run or timing ends a step
// with a timeout verdict long before the step's own limit.
const (
	EnvLoadTimeout = "AMK_LOAD_TIMEOUT" // a module build plus the weight upload (default DefaultLoadTimeout)
	EnvRunTimeout  = "AMK_RUN_TIMEOUT"  // one checked launch (default DefaultRunTimeout)
	EnvTimeTimeout = "AMK_TIME_TIMEOUT" // the timed launches of one trial (default DefaultTimeTimeout)
)

// OptionsFromEnv reads the launcher's request bounds from the environment;
// a value that is not a duration between 1 s and 1 h is an error naming it.
func OptionsFromEnv() (Options, error) {
	var o Options
	for _, e := range []struct {
		name string
		to   *time.Duration
	}{{EnvLoadTimeout, &o.LoadTimeout}, {EnvRunTimeout, &o.RunTimeout}, {EnvTimeTimeout, &o.TimeTimeout}} {
		v := strings.TrimSpace(os.Getenv(e.name))
		if v == "" {
			continue
		}
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Second || d > time.Hour {
			return Options{}, fmt.Errorf("%s=%q: want a duration from 1s to 1h, e.g. 30s", e.name, v)
		}
		*e.to = d
	}
	return o, nil
}

// ChildMain is the body of the hidden launcher subcommand: it opens CUDA
// device --device (or, with --emulate TARGET, the CPU emulator standing in
// for that target) and serves launch protocol frames on stdin/stdout until
// EOF or shutdown, resolving seeded and safetensors weights with a
// WeightProvider. It returns the process exit code: 0 after a clean
// shutdown, 2 for bad arguments or a build without CUDA, 1 otherwise.
func ChildMain(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet(ChildCommand, flag.ContinueOnError)
	fs.SetOutput(stderr)
	ordinal := fs.Int("device", 0, "CUDA device ordinal")
	nvcc := fs.String("nvcc", "nvcc", "nvcc executable")
	cache := fs.String("cache", "", "shared kernel build cache directory")
	var hostArgs, cxxArgs multiFlag
	fs.Var(&hostArgs, "nvcc-arg", "extra trusted nvcc argument (repeatable)")
	emulate := fs.String("emulate", "", "serve the CPU emulator standing in for this GPU target instead of a CUDA device")
	seed := fs.Uint64("seed", 0, "the emulator's first schedule seed")
	cxx := fs.String("cxx", "", "the emulator's C++ compiler (default g++)")
	fs.Var(&cxxArgs, "cxx-arg", "extra trusted argument of the emulator's C++ compiler (repeatable)")
	emuOpt := fs.String("emu-opt", "", "optimisation level of the emulator's kernel builds (default "+build.EmulatorKernelOpt+")")
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
	cfg := launch.ChildConfig{Ordinal: *ordinal, CacheDir: *cache,
		Toolchain: build.Toolchain{NVCC: *nvcc, HostArgs: hostArgs, CXX: *cxx, CXXArgs: cxxArgs, EmulatorOpt: *emuOpt},
		Weights:   &WeightProvider{}, Stdin: stdin, Stdout: stdout}
	if *emulate != "" {
		cfg.Emulator = &launch.EmulatorConfig{Target: *emulate, Seed: *seed}
	}
	err := launch.RunChild(ctx, cfg)
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
