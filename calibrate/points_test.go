package calibrate

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/amk-dev/amk/schedule"
)

// visitPoints are the schedule points scripts/gpu/visit.sh B measures for
// the calibration (scripts/gpu/points/NAME.json), besides the reference
// default its eval steps time: the device lowering's default, fully
// fused, two tiles per SM, no projection tiling (fusion only) and the
// streaming ring.
func visitPoints() map[string]schedule.Point {
	tiles := func(n int) schedule.Point {
		p := schedule.DeviceDefault()
		if n == 0 {
			p.Config.DeleteTile("gemv", "tiles_per_sm")
		} else {
			p.Config.SetTile("gemv", "tiles_per_sm", n)
		}
		return p
	}
	ring := schedule.DeviceDefault()
	ring.Knobs["ring_stages"] = 8
	return map[string]schedule.Point{
		"device-default": schedule.DeviceDefault(),
		"fully-fused":    schedule.FullyFused(),
		"tiles-per-sm-2": tiles(2),
		"tiles-per-sm-0": tiles(0),
		"ring":           ring,
	}
}

// The committed point files are the points above, and nothing else.
func TestVisitPointFiles(t *testing.T) {
	want := visitPoints()
	files, err := filepath.Glob(filepath.Join("..", "scripts", "gpu", "points", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != len(want) {
		t.Fatalf("%d point files, want %d: %v", len(files), len(want), files)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		p, err := schedule.ParsePoint(data)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		w, ok := want[name]
		if !ok || p.ID() != w.ID() {
			t.Errorf("%s: %s, want the point named %q (%s)", f, p.ID(), name, w.ID())
		}
	}
}
