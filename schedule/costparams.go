package schedule

// CostParams are the cost model's per-target costs, as data: the constants
// of doc.go's formulas plus the costs the device lowering introduced (a
// hop, the bytes an SM keeps in flight, a cap on one SM's stream rate, the
// staging and epilogue work of a fused tile). TargetCosts returns a
// target's record; a calibration on the GPU (the previous issue) replaces a
// record, never the formulas, so the ranking follows the device.
type CostParams struct {
	AchievableBW   float64 // fraction of the spec HBM bandwidth the SMs' streams share (docs/spec/rules.md R16)
	AchievableFlop float64 // fraction of the spec fp16 rate, split evenly over SMs

	// A hop: what every dependent task pays besides its data.
	DispatchUS float64 // dequeue, decode the instruction, block barrier
	SignalUS   float64 // __syncthreads + device-scope fence + atomicAdd on the out_counter
	WakeUS     float64 // a satisfied counter seen by a polling waiter (acquire load + backoff)

	// Streaming.
	HBMLatencyUS    float64 // one HBM round trip
	InflightPerLane float64 // bytes one thread keeps in flight (x the warp/wavefront width per warp)
	// MaxSMStreamGBs caps one SM's stream rate whatever its bytes in flight
	// (0: no cap beyond Little's law).
	MaxSMStreamGBs  float64
	L2BWFactor      float64 // L2 bandwidth as a multiple of the spec HBM bandwidth (x-cache reloads)
	TileFixedUS     float64 // GEMV/GEMM tile: 2 barriers around the x cache, warp reduction
	PrefetchIssueUS float64 // per look-ahead slot per GEMV/GEMM tile: issuing L2 prefetches
	PipelineGain    float64 // exposed fraction of a tile's bytes: max(MinExposed, 1/(1+gain*depth))
	MinExposed      float64

	// Fused tiles (ir.FusedPatterns).
	StagingUS  float64 // a staging step: one block reduction (RMSNorm) or the SiLU pass, plus a barrier
	EpilogueUS float64 // a RoPE/append epilogue: the tile through shared memory, a barrier, the rotation

	// Quantised tiles (ir.TileQuant): dequantising in registers is ALU
	// work per weight, which caps one SM's stream rate at ALUGOpsPerSM /
	// (1 + DequantOps) weights per ns (the 1 is the FMA), bytes at the
	// stored width plus the scales.
	ALUGOpsPerSM float64 // CUDA-core lane operations per second per SM, G (H100: 128 lanes x ~1.9 GHz)
	DequantOpsI8 float64 // per int8 weight: extract the byte, convert to float
	DequantOpsI4 float64 // per int4 weight: shift/mask the nibble, convert, subtract the offset
}

// DefaultCostParams are the first-principles estimates every target starts
// from (doc.go); none is a fit to a measurement.
func DefaultCostParams() CostParams {
	return CostParams{
		AchievableBW: 0.80, AchievableFlop: 0.70,
		DispatchUS: 0.25, SignalUS: 0.50, WakeUS: 0.60,
		HBMLatencyUS: 0.60, InflightPerLane: 64, L2BWFactor: 2.5,
		TileFixedUS: 0.10, PrefetchIssueUS: 0.04, PipelineGain: 0.6, MinExposed: 0.5,
		StagingUS: 0.15, EpilogueUS: 0.10,
		ALUGOpsPerSM: 240, DequantOpsI8: 2, DequantOpsI4: 3,
	}
}

// TargetCosts is the cost record of a target: DefaultCostParams with the
// target's calibrated overrides, if schedule/costs.json has a record for it
// (CalibratedCosts; written by amkctl calibrate).
func TargetCosts(name string) CostParams {
	c := DefaultCostParams()
	if r, ok := calibratedRecord(name); ok {
		_ = r.Apply(&c) // checked when the file was parsed
	}
	return c
}

// HopUS is what one dependent hop costs on the critical path: dispatch,
// signal and the waiter's wake-up.
func (c CostParams) HopUS() float64 { return c.DispatchUS + c.SignalUS + c.WakeUS }
