package version

import (
	"os"
	"runtime/debug"
	"strings"
	"time"
)

// Set at link time (see the package comment); empty otherwise.
var (
	stamp  = "" // the version, e.g. v1.2.3
	commit = "" // the full commit hash the binary was built from
	date   = "" // the build time, RFC 3339 in UTC
)

// Info is what a binary knows about its own build.
type Info struct {
	// Version is the release version, the module version, or "devel" for
	// a build from a working tree. It never repeats the commit.
	Version string
	// Commit is the first 12 hex digits of the commit the binary was built
	// from, with "-dirty" when the tree was modified; empty when the build
	// did not record one.
	Commit string
	// Built is when the binary was built: the link-time date, else the
	// modification time of the executable itself; zero when neither is known.
	Built time.Time
}

// Read returns this binary's build information.
func Read() Info {
	var in Info
	if info, ok := debug.ReadBuildInfo(); ok {
		in = fromBuildInfo(info)
	} else {
		in.Version = "unknown"
	}
	if stamp != "" {
		in.Version = stamp
	}
	if c := shortCommit(commit); c != "" && !strings.HasPrefix(c, "-") {
		in.Commit = c
	}
	if t, err := time.Parse(time.RFC3339, date); err == nil {
		in.Built = t.UTC()
	} else if exe, err := os.Executable(); err == nil {
		if st, err := os.Stat(exe); err == nil {
			in.Built = st.ModTime().UTC().Truncate(time.Second)
		}
	}
	return in
}

// String returns the build's version as one token, for logs, fingerprints
// and corpus records: the version, followed by "+" and the commit when the
// build recorded one.
func String() string {
	in := Read()
	if in.Commit == "" {
		return in.Version
	}
	return in.Version + "+" + in.Commit
}

// Long returns what --version prints: the version, the commit and the build
// date, each named ("unknown" for what the build did not record).
func Long() string {
	in := Read()
	c, b := in.Commit, "unknown"
	if c == "" {
		c = "unknown"
	}
	if !in.Built.IsZero() {
		b = in.Built.Format("2006-01-02 15:04:05 UTC")
	}
	return in.Version + ", commit " + c + ", built " + b
}

func fromBuildInfo(info *debug.BuildInfo) Info {
	v := info.Main.Version
	if v == "" || v == "(devel)" {
		v = "devel"
	}
	var revision string
	dirty := false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			revision = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	in := Info{Version: v}
	if len(revision) >= 12 {
		in.Commit = revision[:12]
		if dirty {
			in.Commit += "-dirty"
		}
		// A pseudo-version (v0.0.0-20260102150405-0123456789ab+dirty) is
		// no release: it only repeats the commit, which is shown once.
		if strings.Contains(v, "-"+revision[:12]) {
			in.Version = "devel"
		}
	}
	return in
}

// shortCommit keeps the first 12 hex digits of a commit hash and any
// "-dirty" suffix.
func shortCommit(c string) string {
	hash, suffix, _ := strings.Cut(c, "-")
	if len(hash) > 12 {
		hash = hash[:12]
	}
	if suffix != "" {
		return hash + "-" + suffix
	}
	return hash
}
