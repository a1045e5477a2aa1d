package schedule

import (
	"testing"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/model"
)

func mustPreset(t testing.TB, name string) model.Config {
	t.Helper()
	cfg, err := model.Preset(name)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func mustTarget(t testing.TB, name string) *ir.GpuTarget {
	t.Helper()
	tg, err := ir.Target(name)
	if err != nil {
		t.Fatal(err)
	}
	return tg
}

func mustLower(t testing.TB, cfg model.Config, tg *ir.GpuTarget, p Point, opts LowerOptions) *ir.Program {
	t.Helper()
	prog, err := Lower(cfg, tg, p, opts)
	if err != nil {
		t.Fatalf("Lower(%s): %v", cfg.Name, err)
	}
	return prog
}

// autoPoint is the default point without an explicit N_tile (auto width 32).
func autoPoint() Point {
	p := Default()
	p.Config.DeleteTile("gemv", "N_tile")
	return p
}
