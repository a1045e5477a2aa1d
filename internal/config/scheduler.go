package config

import (
	"errors"
	"fmt"
	"github.com/spf13/pflag"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/amk-dev/amk/control"
	"github.com/amk-dev/amk/inputfile"
	"github.com/amk-dev/amk/internal/redisq"
	"github.com/amk-dev/amk/ir"
)

// DefaultSchedulerListen is where the scheduler's HTTP API listens.
const DefaultSchedulerListen = "127.0.0.1:8080"

// Scheduler is the scheduler's configuration.
type Scheduler struct {
	// Workspace is the directory holding the campaigns' ledgers.
	Workspace string `mapstructure:"workspace"`
	Redis     Redis  `mapstructure:"redis"`
	// Listen is the HTTP API (and /metrics, /healthz) address.
	Listen string `mapstructure:"listen"`
	// Token (best from AMK_TOKEN) or TokenFile guards state-changing calls.
	Token     string `mapstructure:"token"`
	TokenFile string `mapstructure:"token_file"`
	// ModelsDir holds the model files (config.json, safetensors) API
	// requests may name, relative to it; empty allows presets only.
	ModelsDir string `mapstructure:"models_dir"`
	// Targets lists the GPU targets campaigns may use; empty means all.
	Targets []string `mapstructure:"targets"`
	// Adopt drives every campaign of the workspace, not only those started
	// through this scheduler's API; one left by an amkctl autoresearch run
	// only for what is left of that run's --iters/--minutes.
	Adopt bool `mapstructure:"adopt"`
	// InfraRetries and WorkerLosses are the per-trial retry budgets.
	InfraRetries int `mapstructure:"infra_retries"`
	WorkerLosses int `mapstructure:"worker_losses"`
	// Retention is how long finished trials stay in Redis.
	Retention time.Duration `mapstructure:"retention"`
	Log       Log           `mapstructure:"log"`
}

func schedulerDefaults() map[string]any {
	m := map[string]any{
		"workspace":     "",
		"listen":        DefaultSchedulerListen,
		"token":         "",
		"token_file":    "",
		"models_dir":    "",
		"targets":       []string{},
		"adopt":         false,
		"infra_retries": redisq.DefaultInfraRetries,
		"worker_losses": redisq.DefaultWorkerLosses,
		"retention":     redisq.DefaultRetention,
	}
	redisDefaults(m)
	logDefaults(m)
	return m
}

var schedulerFlags = append(append([]flagSpec{
	{"workspace", "workspace", kString, "workspace directory (campaign ledgers)"},
	{"listen", "listen", kString, "HTTP API address"},
	{"token-file", "token_file", kString, "file holding the API bearer token"},
	{"models-dir", "models_dir", kString, "directory of the model files API requests may name (default: presets only)"},
	{"targets", "targets", kString, "comma-separated GPU targets campaigns may use (default all)"},
	{"adopt", "adopt", kBool, "drive every campaign of the workspace, not only those started through this scheduler; one an amkctl autoresearch run left is driven only for what is left of that run's --iters/--minutes, and not at all once they are used"},
}, redisFlags...), logFlags...)

// SchedulerFlags registers the scheduler's flags on fs.
func SchedulerFlags(fs *pflag.FlagSet) { register(fs, schedulerFlags, schedulerDefaults()) }

// LoadScheduler reads and validates the scheduler configuration; fs must
// have been set up by SchedulerFlags and parsed.
func LoadScheduler(fs *pflag.FlagSet) (Scheduler, error) {
	var s Scheduler
	if err := load(fs, schedulerFlags, schedulerDefaults(), &s); err != nil {
		return s, err
	}
	for i, t := range s.Targets {
		s.Targets[i] = strings.ToLower(strings.TrimSpace(t))
	}
	return s, s.Validate()
}

// Validate reports every invalid setting.
func (s Scheduler) Validate() error {
	errs := s.Redis.validate()
	if strings.TrimSpace(s.Workspace) == "" {
		errs = append(errs, missing("workspace", "--workspace"))
	}
	if err := checkListen("listen", s.Listen); err != nil {
		errs = append(errs, err)
	}
	if s.Token != "" && s.TokenFile != "" {
		errs = append(errs, &FieldError{Key: "token_file", Msg: "set either token or token_file, not both"})
	}
	if s.Token != "" {
		if err := control.CheckAPIToken(s.Token); err != nil {
			errs = append(errs, &FieldError{Key: "token", Msg: err.Error()})
		}
	}
	if s.TokenFile != "" {
		if _, err := os.Stat(s.TokenFile); err != nil {
			errs = append(errs, &FieldError{Key: "token_file", Msg: err.Error()})
		}
	}
	if s.ModelsDir != "" {
		if info, err := os.Stat(s.ModelsDir); err != nil {
			errs = append(errs, &FieldError{Key: "models_dir", Msg: err.Error()})
		} else if !info.IsDir() {
			errs = append(errs, &FieldError{Key: "models_dir", Msg: s.ModelsDir + " is not a directory"})
		}
	}
	for _, t := range s.Targets {
		if err := checkTarget("targets", t); err != nil {
			errs = append(errs, err)
		}
	}
	if s.InfraRetries < 0 {
		errs = append(errs, &FieldError{Key: "infra_retries", Msg: fmt.Sprintf("%d is negative", s.InfraRetries)})
	}
	if s.WorkerLosses < 0 {
		errs = append(errs, &FieldError{Key: "worker_losses", Msg: fmt.Sprintf("%d is negative", s.WorkerLosses)})
	}
	if s.Retention <= 0 {
		errs = append(errs, &FieldError{Key: "retention", Msg: fmt.Sprintf("%s must be positive", s.Retention)})
	}
	errs = append(errs, s.Log.validate()...)
	return errors.Join(errs...)
}

// APIToken returns the bearer token, reading TokenFile when set; empty
// means none configured.
func (s Scheduler) APIToken() (string, error) {
	if s.TokenFile == "" {
		return s.Token, nil
	}
	b, err := inputfile.ReadFile(s.TokenFile, maxSecretFileBytes)
	if err != nil {
		return "", &FieldError{Key: "token_file", Msg: err.Error()}
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", &FieldError{Key: "token_file", Msg: s.TokenFile + " is empty"}
	}
	if err := control.CheckAPIToken(tok); err != nil {
		return "", &FieldError{Key: "token_file", Msg: err.Error()}
	}
	return tok, nil
}

// TargetList is Targets, or every registered target when empty.
func (s Scheduler) TargetList() []string {
	if len(s.Targets) == 0 {
		return ir.TargetNames()
	}
	return s.Targets
}

// DispatcherOptions is the redisq dispatcher configuration this config
// describes; the caller adds the logger.
func (s Scheduler) DispatcherOptions() (redisq.DispatcherOptions, error) {
	conn, err := s.Redis.Conn()
	if err != nil {
		return redisq.DispatcherOptions{}, err
	}
	return redisq.DispatcherOptions{Conn: conn, Namespace: s.Redis.Namespace,
		InfraRetries: noneIsNegative(s.InfraRetries), WorkerLosses: noneIsNegative(s.WorkerLosses),
		Retention: s.Retention, PollInterval: s.Redis.PollInterval}, nil
}

// noneIsNegative maps the config's 0 (no retries) to redisq's "none".
func noneIsNegative(n int) int {
	if n == 0 {
		return -1
	}
	return n
}

// LogValue logs the configuration with secrets redacted.
func (s Scheduler) LogValue() slog.Value {
	r := s.Redis.redacted()
	token := ""
	if s.Token != "" {
		token = "REDACTED"
	}
	return slog.GroupValue(
		slog.String("workspace", s.Workspace), slog.String("redis", r.Addr), slog.String("redis_user", r.Username),
		slog.String("redis_password", r.Password), slog.String("namespace", r.Namespace),
		slog.String("listen", s.Listen), slog.String("token", token), slog.String("token_file", s.TokenFile),
		slog.String("models_dir", s.ModelsDir),
		slog.Any("targets", s.Targets), slog.Int("infra_retries", s.InfraRetries),
		slog.Int("worker_losses", s.WorkerLosses), slog.Duration("retention", s.Retention),
		slog.Any("sentinels", r.SentinelAddrs), slog.Bool("fleet_secret", r.FleetSecret != "" || r.FleetSecretFile != ""))
}

// String is the redacted form.
func (s Scheduler) String() string { return fmt.Sprint(s.LogValue()) }
