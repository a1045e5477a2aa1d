package launch

import (
	"fmt"
	"sort"
	"strings"

	"github.com/amk-dev/amk/ir"
)

func squash(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// MatchTarget finds the target record of the live device (docs/spec/rules.md R1). With want
// set (the worker's configured target) that record is used and every
// disagreement with the device is returned as a note for the verdict; with
// want empty the record is recognised from the device name (longest record
// name contained in it, same compute capability). A device without a record
// is refused, never treated as some default GPU.
func MatchTarget(info Info, want string) (*ir.GpuTarget, []string, error) {
	cc := info.CCMajor*10 + info.CCMinor
	if want != "" {
		t, err := ir.Target(want)
		if err != nil {
			return nil, nil, err
		}
		if !t.IsCUDA() {
			return nil, nil, fmt.Errorf("target %s is not a CUDA target", t.Name)
		}
		var notes []string
		if !strings.Contains(squash(info.Name), t.Name) {
			notes = append(notes, fmt.Sprintf("device %q is labelled as target %s", info.Name, t.Name))
		}
		if t.SMArch != cc {
			notes = append(notes, fmt.Sprintf("target %s is sm_%d but the device is sm_%d", t.Name, t.SMArch, cc))
		}
		if t.NumSMs != info.SMs {
			notes = append(notes, fmt.Sprintf("target %s has %d SMs, the device %d: the grid is sized from the device", t.Name, t.NumSMs, info.SMs))
		}
		return t, notes, nil
	}
	names := ir.TargetNames()
	sort.SliceStable(names, func(i, j int) bool { return len(names[i]) > len(names[j]) })
	dev := squash(info.Name)
	for _, n := range names {
		t, err := ir.Target(n)
		if err != nil || !t.IsCUDA() || t.SMArch != cc || !strings.Contains(dev, n) {
			continue
		}
		var notes []string
		if t.NumSMs != info.SMs {
			notes = append(notes, fmt.Sprintf("target %s has %d SMs, the device %d: the grid is sized from the device", t.Name, t.NumSMs, info.SMs))
		}
		return t, notes, nil
	}
	return nil, nil, fmt.Errorf("GPU %q (sm_%d, %d SMs) has no target record; add one to ir's registry (refused rather than guessed)", info.Name, cc, info.SMs)
}
