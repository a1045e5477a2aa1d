package flywheel

import "github.com/amk-dev/amk/ir"

func mustTarget(name string) *ir.GpuTarget {
	t, err := ir.Target(name)
	if err != nil {
		panic(err)
	}
	return t
}
