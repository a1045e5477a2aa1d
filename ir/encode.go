package ir

import (
	"maps"
	"slices"
	"strconv"

	"github.com/amk-dev/amk/pyjson"
)

// Encode writes the program exactly as the reference's
// MegakernelProgram.to_json(indent=2) does: keys in its order, enums by name,
// 2-space indent, ASCII escapes. Decode(Encode(p)) re-encodes byte-identically.
func Encode(p *Program) []byte { return pyjson.Indent(ToValue(p)) }

// ToValue maps a program to its ordered JSON document.
func ToValue(p *Program) pyjson.Value {
	meta := p.Meta
	if meta.Kind != pyjson.Object {
		meta = pyjson.ObjectValue()
	}
	target := pyjson.NullValue()
	if p.Target != nil {
		target = TargetValue(p.Target)
	}
	buffers := make([]pyjson.Value, len(p.Buffers))
	for i := range p.Buffers {
		b := &p.Buffers[i]
		src := pyjson.NullValue()
		if b.Source != nil {
			src = pyjson.StringValue(*b.Source)
		}
		buffers[i] = pyjson.ObjectValue(
			pyjson.M("id", intV(b.ID)),
			pyjson.M("name", pyjson.StringValue(b.Name)),
			pyjson.M("kind", pyjson.StringValue(b.Kind.String())),
			pyjson.M("dtype", pyjson.StringValue(b.DType.String())),
			pyjson.M("shape", intsV(b.Shape)),
			pyjson.M("space", pyjson.StringValue(b.Space.String())),
			pyjson.M("source", src),
		)
	}
	counters := make([]pyjson.Value, len(p.Counters))
	for i, c := range p.Counters {
		counters[i] = pyjson.ObjectValue(
			pyjson.M("id", intV(c.ID)), pyjson.M("init", intV(c.Init)), pyjson.M("note", pyjson.StringValue(c.Note)))
	}
	tasks := make([]pyjson.Value, len(p.Tasks))
	for i := range p.Tasks {
		tasks[i] = taskValue(&p.Tasks[i])
	}
	pages := pyjson.NullValue()
	if p.Pages != nil {
		b2p := make([]pyjson.Member, len(p.Pages.BufferToPage))
		for i, bp := range p.Pages.BufferToPage {
			b2p[i] = pyjson.M(strconv.Itoa(bp.Buffer), intV(bp.Page))
		}
		pgs := make([]pyjson.Value, len(p.Pages.Pages))
		for i, pg := range p.Pages.Pages {
			pgs[i] = pyjson.ObjectValue(
				pyjson.M("id", intV(pg.ID)),
				pyjson.M("space", pyjson.StringValue(pg.Space.String())),
				pyjson.M("nbytes", pyjson.IntValue(pg.NBytes)),
				pyjson.M("live_start", intV(pg.LiveStart)),
				pyjson.M("live_end", intV(pg.LiveEnd)),
			)
		}
		pages = pyjson.ObjectValue(pyjson.M("buffer_to_page", pyjson.ObjectValue(b2p...)), pyjson.M("pages", pyjson.ArrayValue(pgs...)))
	}
	config := pyjson.NullValue()
	if p.Config != nil {
		config = ConfigValue(p.Config)
	}
	irv, abiv := p.IRVersion, p.ABIVersion
	if irv == "" {
		irv = IRVersion
	}
	if abiv == "" {
		abiv = ABIVersion
	}
	return pyjson.ObjectValue(
		pyjson.M("ir_version", pyjson.StringValue(irv)),
		pyjson.M("abi_version", pyjson.StringValue(abiv)),
		pyjson.M("meta", meta),
		pyjson.M("target", target),
		pyjson.M("buffers", pyjson.ArrayValue(buffers...)),
		pyjson.M("counters", pyjson.ArrayValue(counters...)),
		pyjson.M("tasks", pyjson.ArrayValue(tasks...)),
		pyjson.M("pages", pages),
		pyjson.M("config", config),
	)
}

func taskValue(t *Task) pyjson.Value {
	waits := make([]pyjson.Value, len(t.Waits))
	for i, w := range t.Waits {
		waits[i] = pyjson.ObjectValue(pyjson.M("counter", intV(w.Counter)), pyjson.M("threshold", intV(w.Threshold)))
	}
	params := make([]pyjson.Member, len(t.Params))
	for i, p := range t.Params {
		params[i] = pyjson.M(p.Key, p.Val)
	}
	sm := pyjson.NullValue()
	if t.SM != nil {
		sm = intV(*t.SM)
	}
	return pyjson.ObjectValue(
		pyjson.M("id", intV(t.ID)),
		pyjson.M("op", pyjson.StringValue(t.Op.String())),
		pyjson.M("inputs", intsV(t.Inputs)),
		pyjson.M("outputs", intsV(t.Outputs)),
		pyjson.M("out_counter", intV(t.OutCounter)),
		pyjson.M("waits", pyjson.ArrayValue(waits...)),
		pyjson.M("params", pyjson.ObjectValue(params...)),
		pyjson.M("sm", sm),
		pyjson.M("est_bytes", pyjson.IntValue(t.EstBytes)),
		pyjson.M("est_flops", pyjson.IntValue(t.EstFlops)),
		pyjson.M("label", pyjson.StringValue(t.Label)),
	)
}

// TargetValue writes a target with every field, in the reference's order.
func TargetValue(t *GpuTarget) pyjson.Value {
	members := []pyjson.Member{
		pyjson.M("name", pyjson.StringValue(t.Name)),
		pyjson.M("sm_arch", intV(t.SMArch)),
		pyjson.M("num_sms", intV(t.NumSMs)),
		pyjson.M("smem_bytes_per_sm", intV(t.SmemBytesPerSM)),
		pyjson.M("smem_bytes_per_block_optin", intV(t.SmemBytesPerBlockOptin)),
		pyjson.M("regs_per_sm", intV(t.RegsPerSM)),
		pyjson.M("max_threads_per_sm", intV(t.MaxThreadsPerSM)),
		pyjson.M("max_regs_per_thread", intV(t.MaxRegsPerThread)),
		pyjson.M("l2_bytes", pyjson.IntValue(t.L2Bytes)),
		pyjson.M("hbm_bytes", pyjson.IntValue(t.HBMBytes)),
		pyjson.M("hbm_bandwidth_gbs", pyjson.FloatValue(t.HBMBandwidthGBs)),
		pyjson.M("fp16_tflops", pyjson.FloatValue(t.FP16TFLOPS)),
		pyjson.M("clock_ghz", pyjson.FloatValue(t.ClockGHz)),
		pyjson.M("supports_cooperative", pyjson.BoolValue(t.SupportsCooperative)),
		pyjson.M("wddm_tdr", pyjson.BoolValue(t.WDDMTDR)),
		pyjson.M("measured_bw_gbs", pyjson.FloatValue(t.MeasuredBWGBs)),
		pyjson.M("note", pyjson.StringValue(t.Note)),
	}
	// amk's own fields, only when set: an NVIDIA record encodes as the
	// reference's does.
	if t.Vendor != "" && t.Vendor != VendorNVIDIA {
		members = append(members, pyjson.M("vendor", pyjson.StringValue(t.Vendor)))
	}
	if t.WavefrontSize > 0 {
		members = append(members, pyjson.M("wavefront_size", intV(t.WavefrontSize)))
	}
	if t.L1BytesPerSM > 0 {
		members = append(members, pyjson.M("l1_bytes_per_sm", intV(t.L1BytesPerSM)))
	}
	if t.LastLevelCacheBytes > 0 {
		members = append(members, pyjson.M("last_level_cache_bytes", pyjson.IntValue(t.LastLevelCacheBytes)))
	}
	if len(t.MatrixTFLOPS) > 0 {
		peaks := make([]pyjson.Member, 0, len(t.MatrixTFLOPS))
		for _, k := range slices.Sorted(maps.Keys(t.MatrixTFLOPS)) {
			peaks = append(peaks, pyjson.M(k, pyjson.FloatValue(t.MatrixTFLOPS[k])))
		}
		members = append(members, pyjson.M("matrix_tflops", pyjson.ObjectValue(peaks...)))
	}
	return pyjson.ObjectValue(members...)
}

// ConfigValue writes a ScheduleConfig as ScheduleConfig.to_dict() does
// (explicit sm_assignment keys become strings).
func ConfigValue(c *ScheduleConfig) pyjson.Value {
	tiling := make([]pyjson.Member, len(c.Tiling))
	for i, e := range c.Tiling {
		sizes := make([]pyjson.Member, len(e.Sizes))
		for j, s := range e.Sizes {
			sizes[j] = pyjson.M(s.Name, intV(s.Value))
		}
		tiling[i] = pyjson.M(e.Op, pyjson.ObjectValue(sizes...))
	}
	groups := make([]pyjson.Value, len(c.FusionGrouping))
	for i, g := range c.FusionGrouping {
		names := make([]pyjson.Value, len(g))
		for j, n := range g {
			names[j] = pyjson.StringValue(n)
		}
		groups[i] = pyjson.ArrayValue(names...)
	}
	var sm pyjson.Value
	if c.SMAssignment.IsExplicit() {
		pins := make([]pyjson.Member, len(c.SMAssignment.Explicit))
		for i, p := range c.SMAssignment.Explicit {
			pins[i] = pyjson.M(strconv.Itoa(p.Task), intV(p.SM))
		}
		sm = pyjson.ObjectValue(pins...)
	} else {
		sm = pyjson.StringValue(c.SMAssignment.Policy)
	}
	return pyjson.ObjectValue(
		pyjson.M("tiling", pyjson.ObjectValue(tiling...)),
		pyjson.M("fusion_grouping", pyjson.ArrayValue(groups...)),
		pyjson.M("sm_assignment", sm),
		pyjson.M("pipelining_depth", intV(c.PipeliningDepth)),
		pyjson.M("page_allocation", pyjson.StringValue(c.PageAllocation)),
		pyjson.M("threads_per_block", intV(c.ThreadsPerBlock)),
		pyjson.M("smem_bytes_per_block", intV(c.SmemBytesPerBlock)),
	)
}

func intV(i int) pyjson.Value { return pyjson.IntValue(int64(i)) }

func intsV(xs []int) pyjson.Value {
	out := make([]pyjson.Value, len(xs))
	for i, x := range xs {
		out[i] = intV(x)
	}
	return pyjson.ArrayValue(out...)
}
