package config

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/amk-dev/amk/inputfile"
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
	// PollInterval is how often an idle consumer polls its queue
	// (redisq.DefaultPollInterval when unset; --poll-interval).
	PollInterval time.Duration `mapstructure:"poll_interval"`
	// SentinelAddrs (host:port of each Redis Sentinel) and SentinelMaster
	// (the monitored primary's name) make the daemons find the primary
	// through Sentinel and follow a failover; Addr is then unused.
	// SentinelPassword (best from AMK_REDIS_SENTINEL_PASSWORD) authenticates
	// to the sentinels when they require it.
	SentinelAddrs    []string `mapstructure:"sentinel_addrs"`
	SentinelMaster   string   `mapstructure:"sentinel_master"`
	SentinelPassword string   `mapstructure:"sentinel_password"`
	// FleetSecret (best from AMK_REDIS_FLEET_SECRET) or FleetSecretFile is
	// the key of the HMAC-SHA256 that authenticates every outcome a worker
	// puts on the queue; the scheduler and its workers must share it.
	FleetSecret     string `mapstructure:"fleet_secret"`
	FleetSecretFile string `mapstructure:"fleet_secret_file"`
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
	m["redis.sentinel_addrs"] = []string{}
	m["redis.sentinel_master"] = ""
	m["redis.sentinel_password"] = ""
	m["redis.fleet_secret"] = ""
	m["redis.fleet_secret_file"] = ""
}

var redisFlags = []flagSpec{
	{"redis", "redis.addr", kString, "Redis host:port or redis://, rediss:// URL"},
	{"redis-user", "redis.username", kString, "Redis ACL user"},
	{"redis-password-file", "redis.password_file", kString, "file holding the Redis password"},
	{"redis-db", "redis.db", kInt, "Redis database number"},
	{"redis-tls", "redis.tls", kBool, "use TLS for a host:port address"},
	{"redis-ca-file", "redis.ca_file", kString, "PEM CA bundle for Redis TLS"},
	{"namespace", "redis.namespace", kString, "queue namespace shared by a scheduler and its workers"},
	{"poll-interval", "redis.poll_interval", kDuration, "how long an idle consumer waits between polls of its queue"},
	{"redis-sentinels", "redis.sentinel_addrs", kString, "comma-separated Redis Sentinel host:port list (replaces --redis)"},
	{"redis-sentinel-master", "redis.sentinel_master", kString, "name of the primary the sentinels monitor"},
	{"fleet-secret-file", "redis.fleet_secret_file", kString, "file holding the fleet secret that authenticates outcomes"},
}

// Conn is the redisq connection; the password file, when set, is read here.
func (r Redis) Conn() (redisq.Conn, error) {
	c := redisq.Conn{Addr: r.Addr, Username: r.Username, Password: r.Password, DB: r.DB, TLS: r.TLS, CAFile: r.CAFile,
		SentinelAddrs: r.SentinelAddrs, SentinelMaster: r.SentinelMaster, SentinelPassword: r.SentinelPassword}
	if r.PasswordFile != "" {
		b, err := inputfile.ReadFile(r.PasswordFile, maxSecretFileBytes)
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
	case len(r.SentinelAddrs) > 0:
		if _, err := (redisq.Conn{SentinelAddrs: r.SentinelAddrs, SentinelMaster: r.SentinelMaster, TLS: r.TLS}).Options(); err != nil {
			errs = append(errs, &FieldError{Key: "redis.sentinel_addrs", Msg: err.Error()})
		}
	case r.SentinelMaster != "":
		errs = append(errs, &FieldError{Key: "redis.sentinel_master", Msg: "set, but redis.sentinel_addrs is empty"})
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
	if r.FleetSecret != "" && r.FleetSecretFile != "" {
		errs = append(errs, &FieldError{Key: "redis.fleet_secret_file", Msg: "set either redis.fleet_secret or redis.fleet_secret_file, not both"})
	}
	if r.FleetSecretFile != "" {
		if _, err := os.Stat(r.FleetSecretFile); err != nil {
			errs = append(errs, &FieldError{Key: "redis.fleet_secret_file", Msg: err.Error()})
		}
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

// MinFleetSecret is the shortest fleet secret accepted (bytes).
const MinFleetSecret = 16

// Secret is the fleet secret, read from FleetSecretFile when set; nil means
// none is configured (outcomes travel unauthenticated).
func (r Redis) Secret() ([]byte, error) {
	secret := r.FleetSecret
	key := "redis.fleet_secret"
	if r.FleetSecretFile != "" {
		b, err := inputfile.ReadFile(r.FleetSecretFile, maxSecretFileBytes)
		if err != nil {
			return nil, &FieldError{Key: "redis.fleet_secret_file", Msg: err.Error()}
		}
		secret, key = strings.TrimSpace(string(b)), "redis.fleet_secret_file"
	}
	if secret == "" {
		return nil, nil
	}
	if len(secret) < MinFleetSecret {
		return nil, &FieldError{Key: key, Msg: fmt.Sprintf("the fleet secret has %d bytes; use at least %d (e.g. openssl rand -hex 32)", len(secret), MinFleetSecret)}
	}
	return []byte(secret), nil
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
	if r.SentinelPassword != "" {
		r.SentinelPassword = "REDACTED"
	}
	if r.FleetSecret != "" {
		r.FleetSecret = "REDACTED"
	}
	if strings.Contains(r.Addr, "://") {
		r.Addr = redisq.Conn{Addr: r.Addr}.String()
	}
	return r
}

func missing(key, flagName string) error {
	return &FieldError{Key: key, Msg: fmt.Sprintf("not set (set %s in the config file, %s or %s)", key, EnvName(key), flagName)}
}
