package config

import (
	"errors"
	"github.com/spf13/pflag"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/amk-dev/amk/internal/redisq"
)

// cleanEnv blanks every AMK_* variable of the test process (viper ignores
// empty variables).
func cleanEnv(t *testing.T) {
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, EnvPrefix+"_") {
			t.Setenv(k, "")
		}
	}
}

func workerFrom(t *testing.T, args ...string) (Worker, error) {
	t.Helper()
	fs := pflag.NewFlagSet("gpuworker", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	WorkerFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return LoadWorker(fs)
}

func schedulerFrom(t *testing.T, args ...string) (Scheduler, error) {
	t.Helper()
	fs := pflag.NewFlagSet("scheduler", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	SchedulerFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return LoadScheduler(fs)
}

func writeFile(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// keys lists the keys of the FieldErrors in err.
func keys(err error) []string {
	var out []string
	var walk func(error)
	walk = func(e error) {
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			for _, x := range j.Unwrap() {
				walk(x)
			}
			return
		}
		var fe *FieldError
		if errors.As(e, &fe) {
			out = append(out, fe.Key)
		}
	}
	if err != nil {
		walk(err)
	}
	slices.Sort(out)
	return out
}

func TestExampleFilesLoad(t *testing.T) {
	cleanEnv(t)
	w, err := workerFrom(t, "--config", "../../deploy/gpuworker.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if w.Target != "h100" || w.Device != "cpu" || w.Listen != DefaultWorkerListen || w.TrialTimeout != 10*time.Minute ||
		w.ShutdownGrace != 30*time.Second || w.Redis.Addr != "127.0.0.1:6379" || w.Redis.PollInterval != redisq.DefaultPollInterval {
		t.Fatalf("worker example = %+v", w)
	}
	s, err := schedulerFrom(t, "--config", "../../deploy/scheduler.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if s.Workspace != "workspace" || s.Listen != DefaultSchedulerListen || !slices.Equal(s.Targets, []string{"h100", "h200"}) ||
		s.InfraRetries != 3 || s.WorkerLosses != 3 || s.Retention != 24*time.Hour {
		t.Fatalf("scheduler example = %+v", s)
	}
}

func TestPrecedenceFlagsEnvFileDefaults(t *testing.T) {
	cleanEnv(t)
	file := writeFile(t, "w.yaml", "redis:\n  addr: file:1\ntarget: h100\ntrial_timeout: 5m\n")
	w, err := workerFrom(t, "--config", file)
	if err != nil {
		t.Fatal(err)
	}
	if w.Redis.Addr != "file:1" || w.Target != "h100" || w.TrialTimeout != 5*time.Minute || w.Listen != DefaultWorkerListen {
		t.Fatalf("file over defaults: %+v", w)
	}
	t.Setenv("AMK_REDIS_ADDR", "env:2")
	t.Setenv("AMK_TARGET", "h200")
	t.Setenv("AMK_TRIAL_TIMEOUT", "90s")
	w, err = workerFrom(t, "--config", file)
	if err != nil {
		t.Fatal(err)
	}
	if w.Redis.Addr != "env:2" || w.Target != "h200" || w.TrialTimeout != 90*time.Second {
		t.Fatalf("env over file: %+v", w)
	}
	w, err = workerFrom(t, "--config", file, "--redis", "flag:3", "--target", "A100", "--trial-timeout", "2m", "--device", "1")
	if err != nil {
		t.Fatal(err)
	}
	if w.Redis.Addr != "flag:3" || w.Target != "a100" || w.TrialTimeout != 2*time.Minute || w.Device != "1" {
		t.Fatalf("flags over env: %+v", w)
	}
	if n, cpu, err := w.DeviceOrdinal(); err != nil || cpu || n != 1 {
		t.Fatalf("DeviceOrdinal = %d %v %v", n, cpu, err)
	}
}

// The poll interval defaults to redisq's and is set by the file, the
// environment or --poll-interval, the last first.
func TestPollIntervalOverrides(t *testing.T) {
	cleanEnv(t)
	file := writeFile(t, "w.yaml", "redis:\n  addr: file:1\n  poll_interval: 20ms\ntarget: h100\n")
	w, err := workerFrom(t, "--redis", "h:1", "--target", "h100")
	if err != nil || w.Redis.PollInterval != redisq.DefaultPollInterval {
		t.Fatalf("default: %v (%v)", w.Redis.PollInterval, err)
	}
	if w, err = workerFrom(t, "--config", file); err != nil || w.Redis.PollInterval != 20*time.Millisecond {
		t.Fatalf("file: %v (%v)", w.Redis.PollInterval, err)
	}
	t.Setenv("AMK_REDIS_POLL_INTERVAL", "100ms")
	if w, err = workerFrom(t, "--config", file); err != nil || w.Redis.PollInterval != 100*time.Millisecond {
		t.Fatalf("env: %v (%v)", w.Redis.PollInterval, err)
	}
	if w, err = workerFrom(t, "--config", file, "--poll-interval", "250ms"); err != nil || w.Redis.PollInterval != 250*time.Millisecond {
		t.Fatalf("flag: %v (%v)", w.Redis.PollInterval, err)
	}
	s, err := schedulerFrom(t, "--redis", "h:1", "--workspace", t.TempDir(), "--poll-interval", "5ms")
	if err != nil || s.Redis.PollInterval != 5*time.Millisecond {
		t.Fatalf("scheduler flag: %v (%v)", s.Redis.PollInterval, err)
	}
	if _, err := workerFrom(t, "--redis", "h:1", "--target", "h100", "--poll-interval", "-1s"); !slices.Contains(keys(err), "redis.poll_interval") {
		t.Fatalf("a negative interval: %v", err)
	}
}

func TestConfigFileFromEnvironment(t *testing.T) {
	cleanEnv(t)
	t.Setenv("AMK_CONFIG", writeFile(t, "w.yaml", "redis: {addr: \"h:1\"}\ntarget: l4\n"))
	w, err := workerFrom(t)
	if err != nil {
		t.Fatal(err)
	}
	if w.Target != "l4" {
		t.Fatalf("target = %q, want l4 from the AMK_CONFIG file", w.Target)
	}
}

func TestWorkerErrorsNameTheKey(t *testing.T) {
	cleanEnv(t)
	cases := []struct {
		name string
		file string
		args []string
		want []string
	}{
		{"missing redis and target", "", nil, []string{"redis.addr", "target"}},
		{"unknown target", "redis: {addr: 'h:1'}\ntarget: h900\n", nil, []string{"target"}},
		{"bad listen", "redis: {addr: 'h:1'}\ntarget: h100\nlisten: nowhere\n", nil, []string{"listen"}},
		{"bad port", "", []string{"--redis", "h:1", "--target", "h100", "--metrics-listen", "127.0.0.1:99999"}, []string{"listen"}},
		{"negative timeouts", "", []string{"--redis", "h:1", "--target", "h100", "--trial-timeout", "-1s", "--shutdown-grace", "-2s"},
			[]string{"shutdown_grace", "trial_timeout"}},
		{"bad device", "", []string{"--redis", "h:1", "--target", "h100", "--device", "gpu"}, []string{"device"}},
		{"bad redis url", "", []string{"--redis", "http://h:1", "--target", "h100"}, []string{"redis.addr"}},
		{"unknown keys", "redis: {addr: 'h:1', adr: 'x'}\ntarget: h100\ntimeout: 5s\n", nil, []string{"redis.adr", "timeout"}},
		{"bad log level", "", []string{"--redis", "h:1", "--target", "h100", "--log-level", "loud"}, []string{"log.level"}},
		{"ca file without tls", "", []string{"--redis", "h:1", "--target", "h100", "--redis-ca-file", "doc.go"}, []string{"redis.ca_file"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := c.args
			if c.file != "" {
				args = append([]string{"--config", writeFile(t, "w.yaml", c.file)}, args...)
			}
			_, err := workerFrom(t, args...)
			if got := keys(err); !slices.Equal(got, c.want) {
				t.Fatalf("error keys %v, want %v (err: %v)", got, c.want, err)
			}
			for _, k := range c.want {
				if !strings.Contains(err.Error(), k) {
					t.Fatalf("message %q does not name %s", err, k)
				}
			}
		})
	}
}

func TestDurationWithoutUnitIsRejected(t *testing.T) {
	cleanEnv(t)
	_, err := workerFrom(t, "--config", writeFile(t, "w.yaml", "redis: {addr: 'h:1'}\ntarget: h100\ntrial_timeout: 600\n"))
	if got := keys(err); !slices.Equal(got, []string{"trial_timeout"}) || !strings.Contains(err.Error(), "unit") {
		t.Fatalf("err = %v, want a missing-unit error naming trial_timeout", err)
	}
}

func TestUnreadableFiles(t *testing.T) {
	cleanEnv(t)
	if _, err := workerFrom(t, "--config", filepath.Join(t.TempDir(), "none.yaml")); err == nil {
		t.Fatal("a missing config file was accepted")
	}
	if _, err := workerFrom(t, "--config", writeFile(t, "w.yaml", "target: [unclosed\n")); err == nil {
		t.Fatal("broken YAML was accepted")
	}
}

func TestSecretsAreRedacted(t *testing.T) {
	cleanEnv(t)
	t.Setenv("AMK_REDIS_PASSWORD", "hunter2")
	t.Setenv("AMK_TOKEN", "tok-secret")
	w, err := workerFrom(t, "--redis", "redis://amk:urlsecret@h:1/0", "--target", "h100")
	if err != nil {
		t.Fatal(err)
	}
	if w.Redis.Password != "hunter2" {
		t.Fatalf("password from env = %q", w.Redis.Password)
	}
	s, err := schedulerFrom(t, "--redis", "h:1", "--workspace", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if tok, err := s.APIToken(); err != nil || tok != "tok-secret" {
		t.Fatalf("token = %q, %v", tok, err)
	}
	for _, text := range []string{w.String(), s.String()} {
		for _, secret := range []string{"hunter2", "urlsecret", "tok-secret"} {
			if strings.Contains(text, secret) {
				t.Fatalf("%q shows %s", text, secret)
			}
		}
	}
}

func TestShortAPITokensAreRefused(t *testing.T) {
	for _, short := range []string{"a", "ab", "abc", "1234567"} {
		cleanEnv(t)
		t.Setenv("AMK_TOKEN", short)
		if _, err := schedulerFrom(t, "--redis", "h:1", "--workspace", t.TempDir()); err == nil || !strings.Contains(err.Error(), "token") {
			t.Errorf("AMK_TOKEN=%q: %v", short, err)
		}
		cleanEnv(t)
		s, err := schedulerFrom(t, "--redis", "h:1", "--workspace", t.TempDir(), "--token-file", writeFile(t, "token", " "+short+"\n"))
		if err != nil {
			t.Fatal(err)
		}
		if tok, err := s.APIToken(); err == nil {
			t.Errorf("token file with %q: token %q accepted", short, tok)
		}
	}
}

func TestSchedulerSettings(t *testing.T) {
	cleanEnv(t)
	tokenFile := writeFile(t, "token", "  abc123-token\n")
	t.Setenv("AMK_TARGETS", "h100,l4")
	s, err := schedulerFrom(t, "--redis", "h:1", "--workspace", "ws", "--token-file", tokenFile, "--listen", "127.0.0.1:7070")
	if err != nil {
		t.Fatal(err)
	}
	if tok, err := s.APIToken(); err != nil || tok != "abc123-token" {
		t.Fatalf("token = %q, %v", tok, err)
	}
	if !slices.Equal(s.TargetList(), []string{"h100", "l4"}) || s.Listen != "127.0.0.1:7070" {
		t.Fatalf("scheduler = %+v", s)
	}
	opts, err := s.DispatcherOptions()
	if err != nil || opts.Conn.Addr != "h:1" || opts.InfraRetries != 3 {
		t.Fatalf("dispatcher options %+v, %v", opts, err)
	}

	t.Setenv("AMK_TARGETS", "h100,b300")
	t.Setenv("AMK_TOKEN", "long-enough-token")
	_, err = schedulerFrom(t, "--redis", "h:1", "--token-file", tokenFile)
	if got := keys(err); !slices.Equal(got, []string{"targets", "token_file", "workspace"}) {
		t.Fatalf("error keys %v (err %v)", got, err)
	}
}

func TestPasswordFileAndWorkerOptions(t *testing.T) {
	cleanEnv(t)
	pw := writeFile(t, "pw", "  s3cret\n")
	w, err := workerFrom(t, "--redis", "h:1", "--target", "h100", "--redis-password-file", pw, "--namespace", "fleet", "--shutdown-grace", "0s")
	if err != nil {
		t.Fatal(err)
	}
	opts, err := w.WorkerOptions()
	if err != nil {
		t.Fatal(err)
	}
	if opts.Conn.Password != "s3cret" || opts.Namespace != "fleet" || opts.Target != "h100" || opts.ShutdownGrace <= 0 {
		t.Fatalf("worker options %+v", opts)
	}
	t.Setenv("AMK_REDIS_PASSWORD", "other")
	_, err = workerFrom(t, "--redis", "h:1", "--target", "h100", "--redis-password-file", pw)
	if got := keys(err); !slices.Equal(got, []string{"redis.password_file"}) {
		t.Fatalf("error keys %v (err %v), want redis.password_file", got, err)
	}
}

// TestPasswordFileIsNotLoggedAsNoPassword: with a password file the startup
// log says the password is redacted and where it comes from, not "".
func TestPasswordFileIsNotLoggedAsNoPassword(t *testing.T) {
	cleanEnv(t)
	pw := writeFile(t, "pw", "s3cret\n")
	s, err := schedulerFrom(t, "--redis", "h:1", "--workspace", t.TempDir(), "--redis-password-file", pw)
	if err != nil {
		t.Fatal(err)
	}
	w, err := workerFrom(t, "--redis", "h:1", "--target", "h100", "--redis-password-file", pw)
	if err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{s.String(), w.String()} {
		if strings.Contains(text, "redis_password= ") || strings.Contains(text, "s3cret") ||
			!strings.Contains(text, "REDACTED (from password_file "+pw+")") {
			t.Errorf("log form %q: want the password shown as read from %s", text, pw)
		}
	}
}

func TestModelsDir(t *testing.T) {
	cleanEnv(t)
	dir := t.TempDir()
	s, err := schedulerFrom(t, "--redis", "h:1", "--workspace", dir, "--models-dir", dir)
	if err != nil || s.ModelsDir != dir {
		t.Fatalf("models_dir = %q, %v", s.ModelsDir, err)
	}
	file := writeFile(t, "f", "x")
	for _, bad := range []string{file, filepath.Join(dir, "absent")} {
		if _, err := schedulerFrom(t, "--redis", "h:1", "--workspace", dir, "--models-dir", bad); !slices.Equal(keys(err), []string{"models_dir"}) {
			t.Errorf("models_dir %s: %v", bad, err)
		}
	}
}
