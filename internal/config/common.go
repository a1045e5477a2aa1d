package config

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/amk-dev/amk/ir"
)

// Log is the logging section (key "log").
type Log struct {
	// Level is debug, info, warn or error.
	Level string `mapstructure:"level"`
	// Format is text or json.
	Format string `mapstructure:"format"`
}

func logDefaults(m map[string]any) {
	m["log.level"] = "info"
	m["log.format"] = "text"
}

var logFlags = []flagSpec{
	{"log-level", "log.level", kString, "log level: debug, info, warn, error"},
	{"log-format", "log.format", kString, "log format: text or json"},
}

var levels = map[string]slog.Level{"debug": slog.LevelDebug, "info": slog.LevelInfo, "warn": slog.LevelWarn, "error": slog.LevelError}

func (l Log) validate() []error {
	var errs []error
	if _, ok := levels[strings.ToLower(l.Level)]; !ok {
		errs = append(errs, &FieldError{Key: "log.level", Msg: fmt.Sprintf("%q is not debug, info, warn or error", l.Level)})
	}
	if f := strings.ToLower(l.Format); f != "text" && f != "json" {
		errs = append(errs, &FieldError{Key: "log.format", Msg: fmt.Sprintf("%q is not text or json", l.Format)})
	}
	return errs
}

// Logger builds the structured logger the section asks for.
func (l Log) Logger(w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: levels[strings.ToLower(l.Level)]}
	if strings.ToLower(l.Format) == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// checkListen validates a host:port listen address.
func checkListen(key, addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return &FieldError{Key: key, Msg: fmt.Sprintf("%q is not host:port (e.g. 127.0.0.1:9101)", addr)}
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return &FieldError{Key: key, Msg: fmt.Sprintf("port %q of %q is not a number in 0..65535", port, addr)}
	}
	if host != "" && host != "localhost" && net.ParseIP(host) == nil && strings.ContainsAny(host, " /") {
		return &FieldError{Key: key, Msg: fmt.Sprintf("host %q of %q is not a host name or IP", host, addr)}
	}
	return nil
}

// checkTarget validates a GPU target name against the registry.
func checkTarget(key, name string) error {
	if !slices.Contains(ir.TargetNames(), name) {
		return &FieldError{Key: key, Msg: fmt.Sprintf("unknown GPU target %q (known: %s)", name, strings.Join(ir.TargetNames(), ", "))}
	}
	return nil
}
