package config

import (
	"errors"
	"fmt"
	"github.com/spf13/pflag"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/amk-dev/amk/dispatch"
	"github.com/amk-dev/amk/internal/redisq"
)

// Worker defaults.
const (
	DefaultWorkerListen  = "127.0.0.1:9101"
	DefaultTrialTimeout  = dispatch.DefaultTrialTimeout
	DefaultShutdownGrace = 30 * time.Second
)

// Worker is the gpuworker's configuration.
type Worker struct {
	Redis Redis `mapstructure:"redis"`
	// Target is the GPU target whose queue this worker serves (h100, ...).
	Target string `mapstructure:"target"`
	// Device is "cpu" (cost-model latencies) or a CUDA device ordinal.
	Device string `mapstructure:"device"`
	// Listen is the address of /metrics and /healthz.
	Listen string `mapstructure:"listen"`
	// TrialTimeout bounds a trial whose spec sets no timeout.
	TrialTimeout time.Duration `mapstructure:"trial_timeout"`
	// ShutdownGrace is how long SIGTERM lets a running trial finish before
	// handing it back to the queue.
	ShutdownGrace time.Duration `mapstructure:"shutdown_grace"`
	// MaxMemoryMB caps the host memory the worker's trials may take (0: what
	// the host or the worker's cgroup has). A trial whose model needs more
	// is refused before anything is allocated.
	MaxMemoryMB int `mapstructure:"max_memory_mb"`
	// MemoryHost names the machine whose memory the worker shares with the
	// other workers of that machine (one admission budget for them all);
	// empty: the hostname. Workers in separate containers of one machine
	// need the same name to share one budget.
	MemoryHost string `mapstructure:"memory_host"`
	Log        Log    `mapstructure:"log"`
}

func workerDefaults() map[string]any {
	m := map[string]any{
		"target":         "",
		"device":         "cpu",
		"listen":         DefaultWorkerListen,
		"trial_timeout":  DefaultTrialTimeout,
		"shutdown_grace": DefaultShutdownGrace,
		"max_memory_mb":  0,
		"memory_host":    "",
	}
	redisDefaults(m)
	logDefaults(m)
	return m
}

var workerFlags = append(append([]flagSpec{
	{"target", "target", kString, "GPU target whose queue to serve (trials:<target>)"},
	{"device", "device", kString, "cpu, emu (the CUDA kernels on the CPU emulator), or a CUDA device ordinal (0, 1, ...)"},
	{"metrics-listen", "listen", kString, "address of /metrics and /healthz"},
	{"trial-timeout", "trial_timeout", kDuration, "wall-clock limit of a trial whose spec sets none"},
	{"shutdown-grace", "shutdown_grace", kDuration, "on SIGTERM, how long the running trial may finish before it is handed back"},
	{"max-memory-mb", "max_memory_mb", kInt, "host memory (MiB) the worker's trials may use; 0 = the host's or cgroup's limit"},
	{"memory-host", "memory_host", kString, "name of the machine whose memory this worker shares with its other workers (one admission budget); empty = the hostname"},
}, redisFlags...), logFlags...)

// WorkerFlags registers the gpuworker's flags on fs.
func WorkerFlags(fs *pflag.FlagSet) { register(fs, workerFlags, workerDefaults()) }

// LoadWorker reads and validates the worker configuration; fs must have been
// set up by WorkerFlags and parsed.
func LoadWorker(fs *pflag.FlagSet) (Worker, error) {
	var w Worker
	if err := load(fs, workerFlags, workerDefaults(), &w); err != nil {
		return w, err
	}
	w.Target = strings.ToLower(strings.TrimSpace(w.Target))
	w.Device = strings.ToLower(strings.TrimSpace(w.Device))
	return w, w.Validate()
}

// Validate reports every invalid setting.
func (w Worker) Validate() error {
	errs := w.Redis.validate()
	if w.Target == "" {
		errs = append(errs, missing("target", "--target"))
	} else if err := checkTarget("target", w.Target); err != nil {
		errs = append(errs, err)
	}
	if _, _, err := w.DeviceOrdinal(); err != nil {
		errs = append(errs, err)
	}
	if err := checkListen("listen", w.Listen); err != nil {
		errs = append(errs, err)
	}
	if w.TrialTimeout <= 0 {
		errs = append(errs, &FieldError{Key: "trial_timeout", Msg: fmt.Sprintf("%s must be positive", w.TrialTimeout)})
	}
	if w.MaxMemoryMB < 0 {
		errs = append(errs, &FieldError{Key: "max_memory_mb", Msg: fmt.Sprintf("%d is negative", w.MaxMemoryMB)})
	}
	if len(w.MemoryHost) > 255 || strings.ContainsFunc(w.MemoryHost, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		errs = append(errs, &FieldError{Key: "memory_host", Msg: "must be at most 255 characters, without spaces or control characters"})
	}
	if w.ShutdownGrace < 0 {
		errs = append(errs, &FieldError{Key: "shutdown_grace", Msg: fmt.Sprintf("%s is negative", w.ShutdownGrace)})
	}
	errs = append(errs, w.Log.validate()...)
	return errors.Join(errs...)
}

// DeviceOrdinal parses Device: cpu is true for "cpu", otherwise ordinal is
// the CUDA device number (0 for "emu", the CPU emulator: Emulated).
func (w Worker) DeviceOrdinal() (ordinal int, cpu bool, err error) {
	if w.Device == "cpu" {
		return 0, true, nil
	}
	if w.Emulated() {
		return 0, false, nil
	}
	n, perr := strconv.Atoi(strings.TrimPrefix(w.Device, "cuda:"))
	if perr != nil || n < 0 {
		return 0, false, &FieldError{Key: "device", Msg: fmt.Sprintf("%q is not cpu, emu or a CUDA device ordinal (0, 1, ...)", w.Device)}
	}
	return n, false, nil
}

// Emulated reports whether the worker runs the CUDA kernels on the CPU
// emulator standing in for its target (--device emu).
func (w Worker) Emulated() bool { return w.Device == "emu" }

// MetricsListen is the address the metrics listener tries first: Listen,
// except that with the default address a CUDA worker takes port 9101 plus
// its device ordinal, so one worker per GPU on a host gets distinct,
// predictable ports. (Whatever is taken, the worker falls back to a free
// port and announces it to the scheduler.)
func (w Worker) MetricsListen() string {
	ordinal, cpu, err := w.DeviceOrdinal()
	if w.Listen != DefaultWorkerListen || cpu || w.Emulated() || err != nil {
		return w.Listen
	}
	host, port, _ := net.SplitHostPort(DefaultWorkerListen)
	base, _ := strconv.Atoi(port)
	return net.JoinHostPort(host, strconv.Itoa(base+ordinal))
}

// WorkerOptions is the redisq worker configuration this config describes;
// the caller adds the evaluator, identity and logger.
func (w Worker) WorkerOptions() (redisq.WorkerOptions, error) {
	conn, err := w.Redis.Conn()
	if err != nil {
		return redisq.WorkerOptions{}, err
	}
	grace := w.ShutdownGrace
	if grace == 0 {
		grace = time.Millisecond // hand back at once (redisq reads 0 as its default)
	}
	return redisq.WorkerOptions{Conn: conn, Namespace: w.Redis.Namespace, Target: w.Target, Device: w.Device,
		PollInterval: w.Redis.PollInterval, ShutdownGrace: grace, Host: w.MemoryHost}, nil
}

// LogValue logs the configuration with secrets redacted.
func (w Worker) LogValue() slog.Value {
	r := w.Redis.redacted()
	return slog.GroupValue(
		slog.String("redis", r.Addr), slog.String("redis_user", r.Username), slog.String("redis_password", r.Password),
		slog.String("namespace", r.Namespace), slog.String("target", w.Target), slog.String("device", w.Device),
		slog.String("listen", w.Listen), slog.Duration("trial_timeout", w.TrialTimeout),
		slog.Duration("shutdown_grace", w.ShutdownGrace), slog.Int("max_memory_mb", w.MaxMemoryMB), slog.String("memory_host", w.MemoryHost),
		slog.Any("sentinels", r.SentinelAddrs), slog.Bool("fleet_secret", r.FleetSecret != "" || r.FleetSecretFile != ""))
}

// String is the redacted form.
func (w Worker) String() string { return fmt.Sprint(w.LogValue()) }
