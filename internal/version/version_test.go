package version

import (
	"runtime/debug"
	"testing"
)

func TestFromBuildInfo(t *testing.T) {
	cases := []struct {
		main     string
		settings []debug.BuildSetting
		want     string
	}{
		{"", nil, "devel"},
		{"(devel)", nil, "devel"},
		{"v1.4.0", nil, "v1.4.0"},
		{"(devel)", []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef0123"}}, "devel+0123456789ab"},
		{"v1.4.0", []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.modified", Value: "true"}}, "v1.4.0+0123456789ab-dirty"},
		{"v1.4.0", []debug.BuildSetting{{Key: "vcs.revision", Value: "short"}}, "v1.4.0"},
	}
	for _, c := range cases {
		info := &debug.BuildInfo{Main: debug.Module{Version: c.main}, Settings: c.settings}
		if got := fromBuildInfo(info); got != c.want {
			t.Errorf("%q %v: %q, want %q", c.main, c.settings, got, c.want)
		}
	}
}

func TestStampWins(t *testing.T) {
	old := stamp
	stamp = "v9.9.9"
	defer func() { stamp = old }()
	if got := String(); got != "v9.9.9" {
		t.Fatalf("String() = %q with a stamp", got)
	}
	stamp = ""
	if String() == "" {
		t.Fatal("String() is empty without a stamp")
	}
}
