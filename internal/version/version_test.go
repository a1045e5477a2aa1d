package version

import (
	"runtime/debug"
	"strings"
	"testing"
	"time"
)

func TestFromBuildInfo(t *testing.T) {
	rev := debug.BuildSetting{Key: "vcs.revision", Value: "0123456789abcdef0123"}
	dirty := debug.BuildSetting{Key: "vcs.modified", Value: "true"}
	cases := []struct {
		main          string
		settings      []debug.BuildSetting
		version, want string
	}{
		{"", nil, "devel", ""},
		{"(devel)", nil, "devel", ""},
		{"v1.4.0", nil, "v1.4.0", ""},
		{"(devel)", []debug.BuildSetting{rev}, "devel", "0123456789ab"},
		{"v1.4.0", []debug.BuildSetting{rev, dirty}, "v1.4.0", "0123456789ab-dirty"},
		{"v1.4.0", []debug.BuildSetting{{Key: "vcs.revision", Value: "short"}}, "v1.4.0", ""},
		// Go stamps a build from a checkout with a pseudo-version that
		// repeats the commit: the commit is shown once.
		{"v0.0.0-20261128062333-0123456789ab+dirty", []debug.BuildSetting{rev, dirty}, "devel", "0123456789ab-dirty"},
	}
	for _, c := range cases {
		info := &debug.BuildInfo{Main: debug.Module{Version: c.main}, Settings: c.settings}
		got := fromBuildInfo(info)
		if got.Version != c.version || got.Commit != c.want {
			t.Errorf("%q %v: %+v, want version %q commit %q", c.main, c.settings, got, c.version, c.want)
		}
	}
}

func TestStampsWin(t *testing.T) {
	old := [3]string{stamp, commit, date}
	defer func() { stamp, commit, date = old[0], old[1], old[2] }()
	stamp, commit, date = "v9.9.9", "fedcba9876543210fedc", "2026-11-28T06:30:00Z"
	if got := String(); got != "v9.9.9+fedcba987654" {
		t.Errorf("String() = %q with stamps", got)
	}
	in := Read()
	if !in.Built.Equal(time.Date(2026, 11, 28, 6, 30, 0, 0, time.UTC)) {
		t.Errorf("Built = %v", in.Built)
	}
	if got, want := Long(), "v9.9.9, commit fedcba987654, built 2026-11-28 06:30:00 UTC"; got != want {
		t.Errorf("Long() = %q, want %q", got, want)
	}
	stamp, commit, date = "", "", ""
	if String() == "" {
		t.Fatal("String() is empty without a stamp")
	}
	// Without a stamped date the executable's own time stands in for it.
	if l := Long(); !strings.Contains(l, ", commit ") || strings.Contains(l, "built unknown") {
		t.Errorf("Long() = %q without stamps", l)
	}
}
