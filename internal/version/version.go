package version

import "runtime/debug"

// stamp is set at link time (see the package comment); empty otherwise.
var stamp = ""

// String returns the build's version: the link-time stamp when set,
// otherwise the module version from the build information ("devel" for a
// build from a working tree), followed by "+" and the first 12 hex digits of
// the VCS revision when the build recorded one (and "-dirty" for a modified
// tree).
func String() string {
	if stamp != "" {
		return stamp
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	return fromBuildInfo(info)
}

func fromBuildInfo(info *debug.BuildInfo) string {
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
	if len(revision) >= 12 {
		v += "+" + revision[:12]
		if dirty {
			v += "-dirty"
		}
	}
	return v
}
