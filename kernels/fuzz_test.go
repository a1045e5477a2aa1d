package kernels

import (
	"testing"

	"github.com/amk-dev/amk/ir"
)

// FuzzDeviceChecks feeds arbitrary program JSON through everything the
// launcher does before touching a device: none of it may panic.
func FuzzDeviceChecks(f *testing.F) {
	f.Add(ir.Encode(miniProgram()))
	f.Add(ir.Encode(attentionProgram(64, 4, 2, 2)))
	p := miniProgram()
	p.Tasks[2].Op = ir.OpFUSED
	p.Buffers[3].Shape = []int{0}
	f.Add(ir.Encode(p))
	f.Add([]byte(`{"ir_version": "0.2.0", "abi_version": "0.2", "meta": {}, "target": null, "buffers": [], "counters": [], "tasks": [], "pages": null, "config": null}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ir.Decode(data)
		if err != nil {
			return
		}
		_ = CheckDevice(p)
		_, _ = PlanSmem(p, DefaultVariant(), 232448)
		for _, unchecked := range []bool{false, true} {
			tb, err := MarshalProgram(p, MarshalOptions{Unchecked: unchecked})
			if err != nil {
				continue
			}
			if len(tb.Buffers) != BufferRecordSize*tb.NBuffers || len(tb.QueueOff) != 4*tb.NumQueues {
				t.Fatalf("inconsistent tables: %d buffers, %d bytes", tb.NBuffers, len(tb.Buffers))
			}
			_ = tb.ProgramRecord(DeviceAddrs{})
		}
	})
}
