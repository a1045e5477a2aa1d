package config

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/amk-dev/amk/internal/redisq"
)

// Redis is the connection section shared by both daemons (key "redis").
type Redis struct {
	// Addr is host:port or a redis:// / rediss:// URL.
	Addr     string `mapstructure:"addr"`
	Username string `mapstructure:"username"`
	// Password is best given by AMK_REDIS_PASSWORD or PasswordFile.
	Password     string `mapstructure:"password"`
	PasswordFile string `mapstructure:"password_file"`
	DB           int    `mapstructure:"db"`
	TLS          bool   `mapstructure:"tls"`
	CAFile       string `mapstructure:"ca_file"`
	// Namespace prefixes every queue, so fleets can share one Redis.
	Namespace string `mapstructure:"namespace"`
	// PollInterval is how often an idle consumer polls its queue.
	PollInterval time.Duration `mapstructure:"poll_interval"`
}

func redisDefaults(m map[string]any) {
	m["redis.addr"] = ""
	m["redis.username"] = ""
	m["redis.password"] = ""
	m["redis.password_file"] = ""
	m["redis.db"] = 0
	m["redis.tls"] = false
	m["redis.ca_file"] = ""
	m["redis.namespace"] = ""
	m["redis.poll_interval"] = redisq.DefaultPollInterval
}

var redisFlags = []flagSpec{
	{"redis", "redis.addr", kString, "Redis host:port or redis://, rediss:// URL"},
	{"redis-user", "redis.username", kString, "Redis ACL user"},
	{"redis-password-file", "redis.password_file", kString, "file holding the Redis password"},
	{"redis-db", "redis.db", kInt, "Redis database number"},
	{"redis-tls", "redis.tls", kBool, "use TLS for a host:port address"},
	{"redis-ca-file", "redis.ca_file", kString, "PEM CA bundle for Redis TLS"},
	{"namespace", "redis.namespace", kString, "queue namespace shared by a scheduler and its workers"},
}

// Conn is the redisq connection; the password file, when set, is read here.
func (r Redis) Conn() (redisq.Conn, error) {
	c := redisq.Conn{Addr: r.Addr, Username: r.Username, Password: r.Password, DB: r.DB, TLS: r.TLS, CAFile: r.CAFile}
	if r.PasswordFile != "" {
		b, err := os.ReadFile(r.PasswordFile)
		if err != nil {
			return c, &FieldError{Key: "redis.password_file", Msg: err.Error()}
		}
		c.Password = strings.TrimSpace(string(b))
	}
	return c, nil
}

func (r Redis) validate() []error {
	var errs []error
	switch {
	case strings.TrimSpace(r.Addr) == "":
		errs = append(errs, missing("redis.addr", "--redis"))
	default:
		if _, err := (redisq.Conn{Addr: r.Addr, TLS: r.TLS}).Options(); err != nil {
			errs = append(errs, &FieldError{Key: "redis.addr", Msg: err.Error()})
		}
	}
	if r.Password != "" && r.PasswordFile != "" {
		errs = append(errs, &FieldError{Key: "redis.password_file", Msg: "set either redis.password or redis.password_file, not both"})
	}
	if r.PasswordFile != "" {
		if _, err := os.Stat(r.PasswordFile); err != nil {
			errs = append(errs, &FieldError{Key: "redis.password_file", Msg: err.Error()})
		}
	}
	if r.CAFile != "" {
		if _, err := os.Stat(r.CAFile); err != nil {
			errs = append(errs, &FieldError{Key: "redis.ca_file", Msg: err.Error()})
		} else if !r.TLS && !strings.HasPrefix(r.Addr, "rediss://") {
			errs = append(errs, &FieldError{Key: "redis.ca_file", Msg: "set, but TLS is off (use rediss:// or redis.tls: true)"})
		}
	}
	if r.DB < 0 {
		errs = append(errs, &FieldError{Key: "redis.db", Msg: fmt.Sprintf("%d is negative", r.DB)})
	}
	if r.PollInterval < 0 {
		errs = append(errs, &FieldError{Key: "redis.poll_interval", Msg: fmt.Sprintf("%s is negative", r.PollInterval)})
	}
	if r.Namespace != "" && strings.ContainsAny(r.Namespace, " \t\n{}") {
		errs = append(errs, &FieldError{Key: "redis.namespace", Msg: fmt.Sprintf("%q may not contain spaces or braces", r.Namespace)})
	}
	return errs
}

// redacted is r with its password hidden; a password read from a file is
// shown as such (not as an empty password).
func (r Redis) redacted() Redis {
	switch {
	case r.PasswordFile != "":
		r.Password = "REDACTED (from password_file " + r.PasswordFile + ")"
	case r.Password != "":
		r.Password = "REDACTED"
	}
	if strings.Contains(r.Addr, "://") {
		r.Addr = redisq.Conn{Addr: r.Addr}.String()
	}
	return r
}

func missing(key, flagName string) error {
	return &FieldError{Key: key, Msg: fmt.Sprintf("not set (set %s in the config file, %s or %s)", key, EnvName(key), flagName)}
}
