package redisq

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/amk-dev/amk/inputfile"
)

// Conn says how to reach Redis. Addr is either host:port or a URL
// (redis://[user:password@]host[:port][/db], rediss:// for TLS). Username,
// Password and DB, when set, override what the URL says. Secrets never appear
// in String or in log output.
type Conn struct {
	Addr     string
	Username string
	Password string
	DB       int
	// TLS forces TLS for a plain host:port address (rediss:// implies it).
	TLS bool
	// CAFile is a PEM bundle that verifies the server certificate instead of
	// the system roots.
	CAFile string
	// SentinelAddrs (host:port of each Redis Sentinel) and SentinelMaster
	// (the name the sentinels monitor) select Sentinel mode: the client asks
	// the sentinels for the current primary and follows a failover; Addr is
	// then ignored. SentinelPassword authenticates to the sentinels.
	SentinelAddrs    []string
	SentinelMaster   string
	SentinelPassword string
}

// sentinel reports whether c selects Sentinel mode.
func (c Conn) sentinel() bool { return len(c.SentinelAddrs) > 0 }

// ErrNoAddr is returned when Conn has no address.
var ErrNoAddr = errors.New("redis address is empty")

// Options turns c into go-redis client options. Errors never contain the
// password.
// In Sentinel mode Addr is the first sentinel's.
func (c Conn) Options() (*redis.Options, error) {
	o, err := c.options()
	if err != nil {
		return nil, scrub(err, c.Password, urlPassword(c.Addr), c.SentinelPassword)
	}
	return o, nil
}

func (c Conn) options() (*redis.Options, error) {
	addr := strings.TrimSpace(c.Addr)
	if c.sentinel() {
		if strings.TrimSpace(c.SentinelMaster) == "" {
			return nil, errors.New("redis sentinels given without the name of the primary they monitor (sentinel_master)")
		}
		for _, s := range c.SentinelAddrs {
			host, port, err := net.SplitHostPort(strings.TrimSpace(s))
			if err != nil || host == "" || port == "" {
				return nil, fmt.Errorf("redis sentinel address %q is not host:port", redactPlain(s))
			}
		}
		addr = strings.TrimSpace(c.SentinelAddrs[0])
	}
	if addr == "" {
		return nil, ErrNoAddr
	}
	var o *redis.Options
	if strings.Contains(addr, "://") {
		u, err := url.Parse(addr)
		if err != nil {
			return nil, fmt.Errorf("redis URL %s: %w", redactURL(addr), stripURL(err))
		}
		if u.Scheme != "redis" && u.Scheme != "rediss" {
			return nil, fmt.Errorf("redis URL %s: scheme %q is not redis:// or rediss://", redactURL(addr), u.Scheme)
		}
		if o, err = redis.ParseURL(addr); err != nil {
			return nil, fmt.Errorf("redis URL %s: %w", redactURL(addr), stripURL(err))
		}
	} else {
		host, port, err := net.SplitHostPort(addr)
		if err != nil || host == "" || port == "" {
			return nil, fmt.Errorf("redis address %q is not host:port or a redis:// URL", redactPlain(addr))
		}
		o = &redis.Options{Addr: addr}
	}
	if c.Username != "" {
		o.Username = c.Username
	}
	if c.Password != "" {
		o.Password = c.Password
	}
	if c.DB != 0 {
		o.DB = c.DB
	}
	if c.DB < 0 {
		return nil, fmt.Errorf("redis db %d is negative", c.DB)
	}
	if c.TLS && o.TLSConfig == nil {
		host, _, _ := net.SplitHostPort(o.Addr)
		o.TLSConfig = &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}
	}
	if c.CAFile != "" {
		if o.TLSConfig == nil {
			return nil, fmt.Errorf("redis CA file %s given but TLS is off (use rediss:// or tls)", c.CAFile)
		}
		pem, err := inputfile.ReadFile(c.CAFile, 1<<20) // regular files only, never blocks
		if err != nil {
			return nil, fmt.Errorf("redis CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("redis CA file %s holds no PEM certificate", c.CAFile)
		}
		o.TLSConfig.RootCAs = pool
	}
	// Only RESP2 is needed; it also keeps Redis 6 and 7.0 servers working.
	o.Protocol = 2
	return o, nil
}

// Client opens a go-redis client for c: a failover client that follows
// the sentinels' primary in Sentinel mode (asynq's servers, clients and
// inspectors are built on it, so they follow it too).
func (c Conn) Client() (*redis.Client, error) {
	o, err := c.Options()
	if err != nil {
		return nil, err
	}
	if !c.sentinel() {
		return redis.NewClient(o), nil
	}
	addrs := make([]string, len(c.SentinelAddrs))
	for i, a := range c.SentinelAddrs {
		addrs[i] = strings.TrimSpace(a)
	}
	return redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName: strings.TrimSpace(c.SentinelMaster), SentinelAddrs: addrs, SentinelPassword: c.SentinelPassword,
		Username: o.Username, Password: o.Password, DB: o.DB, TLSConfig: o.TLSConfig, Protocol: o.Protocol,
	}), nil
}

// String describes the connection with every secret redacted.
func (c Conn) String() string {
	addr := redactPlain(c.Addr)
	if strings.Contains(c.Addr, "://") {
		addr = redactURL(c.Addr)
	}
	if c.sentinel() {
		addr = "sentinel:" + c.SentinelMaster + "@" + redactPlain(strings.Join(c.SentinelAddrs, ","))
	}
	var b strings.Builder
	b.WriteString(addr)
	if c.Username != "" {
		fmt.Fprintf(&b, " user=%s", c.Username)
	}
	if c.Password != "" {
		b.WriteString(" password=REDACTED")
	}
	if c.DB != 0 {
		fmt.Fprintf(&b, " db=%d", c.DB)
	}
	if c.TLS || strings.HasPrefix(c.Addr, "rediss://") {
		b.WriteString(" tls")
	}
	return b.String()
}

// LogValue makes slog print the redacted form.
func (c Conn) LogValue() slog.Value { return slog.StringValue(c.String()) }

// redactURL hides the password of a URL. It splits the text itself rather
// than trusting url.Parse, which reads a password holding '#', '/' or '?' as
// part of the path or fragment.
func redactURL(raw string) string {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok || (scheme != "redis" && scheme != "rediss") {
		// Not a well-formed redis URL: credentials may sit anywhere
		// before the last '@', the "scheme" included.
		return redactPlain(raw)
	}
	at := strings.LastIndexByte(rest, '@')
	if at < 0 {
		return raw
	}
	user, _, hasPassword := strings.Cut(rest[:at], ":")
	if !hasPassword {
		return raw
	}
	return scheme + "://" + user + ":REDACTED" + rest[at:]
}

// urlPassword is the password part of a URL's user info, split as redactURL
// does; empty when there is none.
func urlPassword(raw string) string {
	_, rest, ok := strings.Cut(raw, "://")
	if !ok {
		rest = raw
	}
	at := strings.LastIndexByte(rest, '@')
	if at < 0 {
		return ""
	}
	_, pw, _ := strings.Cut(rest[:at], ":")
	return pw
}

// scrub replaces every secret in err's text, in each spelling a library
// may have used when it quoted or escaped it into the message.
func scrub(err error, secrets ...string) error {
	msg := err.Error()
	changed := false
	for _, s := range secrets {
		if s == "" {
			continue
		}
		for _, form := range secretForms(s) {
			if strings.Contains(msg, form) {
				msg = strings.ReplaceAll(msg, form, "REDACTED")
				changed = true
			}
		}
	}
	if !changed {
		return err
	}
	return errors.New(msg)
}

// secretForms lists the spellings of s an error message may contain: as is,
// inside %q or %+q quoting, and URL-escaped.
func secretForms(s string) []string {
	unquote := func(q string) string { return q[1 : len(q)-1] }
	forms := []string{s, unquote(strconv.Quote(s)), unquote(strconv.QuoteToASCII(s)), url.PathEscape(s), url.QueryEscape(s)}
	// Longest first, so a form that contains another is replaced whole.
	sort.Slice(forms, func(i, j int) bool { return len(forms[i]) > len(forms[j]) })
	return forms
}

// redactPlain hides what could be credentials (anything before an '@') in
// an address that is not a URL.
func redactPlain(addr string) string {
	if i := strings.LastIndexByte(addr, '@'); i >= 0 {
		return "REDACTED" + addr[i:]
	}
	return addr
}

// stripURL keeps only the reason of a URL parsing error. url.Error and
// go-redis quote parts of the URL into their messages (a port, a database
// number, a path), and a malformed URL can put the password in any of them,
// so everything from the first quoted value on is dropped.
func stripURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	const withheld = " (value withheld: it may hold credentials)"
	msg := err.Error()
	if i := strings.Index(msg, "://"); i >= 0 {
		msg = msg[:i] + "…"
	}
	// go-redis writes "redis: <reason>: <value>", the value unquoted.
	if rest, ok := strings.CutPrefix(msg, "redis: "); ok {
		if reason, _, cut := strings.Cut(rest, ":"); cut {
			return errors.New("redis: " + reason + withheld)
		}
	}
	if i := strings.IndexAny(msg, "\"'`"); i >= 0 {
		msg = strings.TrimRight(msg[:i], ": ") + withheld
	}
	return errors.New(msg)
}
