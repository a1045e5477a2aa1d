package trial

import (
	"fmt"

	"github.com/amk-dev/amk/model"
)

// processAllowance is the memory an evaluator needs besides a model's own
// tensors: the Go runtime, the lowered program, the verdict, the transport.
const processAllowance int64 = 256 << 20

// Memory is what evaluating trials of one model holds at once on an
// evaluator: the figures the fleet compares with what an evaluator has
// before anything is allocated.
type Memory struct {
	// Host is host RAM: the weights, at their stored dtype, of the model
	// whose numerics are checked (a layer truncation of a big model, see
	// DefaultCheckBytes), the KV caches of the eager oracle and the
	// reference VM at max_seq (4 bytes a value), and a fixed allowance for
	// the process.
	Host int64 `json:"host_bytes"`
	// Device is GPU memory on a CUDA evaluator: the full model's weights at
	// its dtype, its KV caches at max_seq, and the same allowance; 0 for a
	// CPU evaluator.
	Device int64 `json:"device_bytes"`
	// CheckLayers is how many layers are checked on the CPU.
	CheckLayers int `json:"check_layers"`
}

// EstimateMemory is the memory trials of cfg need on an evaluator whose
// model cache has the given check budget (<= 0: DefaultCheckBytes); cuda
// adds the device side. It allocates nothing.
func EstimateMemory(cfg model.Config, cuda bool, checkBytes int64) Memory {
	if checkBytes <= 0 {
		checkBytes = DefaultCheckBytes
	}
	check := checkConfig(cfg, checkBytes)
	m := Memory{CheckLayers: check.NLayers}
	m.Host = hostWeightBytes(check) + 2*kvElems(check)*4 + processAllowance
	if cuda {
		m.Device = cfg.WeightBytes() + cfg.DType.NBytes(kvElems(cfg)) + processAllowance
	}
	return m
}

// kvElems is the number of K and V cache values of cfg at max_seq.
func kvElems(cfg model.Config) int64 {
	return 2 * int64(cfg.NLayers) * int64(cfg.MaxSeq) * int64(cfg.KVDim())
}

// checkConfig is the model whose numerics are checked: cfg itself, or its
// first layers when the weights a check of cfg holds (hostWeightBytes)
// exceed checkBytes.
func checkConfig(cfg model.Config, checkBytes int64) model.Config {
	check := cfg
	if check.NLayers <= 1 || hostWeightBytes(check) <= checkBytes {
		return check
	}
	// The most layers (at least one) whose weights fit: the bytes grow with
	// the layers, so a binary search over the arithmetic count finds it in
	// O(log layers), where removing one layer at a time was O(layers²).
	lo, hi := 1, check.NLayers-1 // the answer lies in [lo, hi]
	for lo < hi {
		mid := lo + (hi-lo+1)/2
		check.NLayers = mid
		if hostWeightBytes(check) <= checkBytes {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	check.NLayers = lo
	return check
}

// hostWeightBytes is the weights a check of cfg holds at once: its stored
// weights, and for a quantised model the float weights it is quantised
// from as well (seeded weights are generated in float, then quantised).
func hostWeightBytes(cfg model.Config) int64 {
	n := cfg.WeightBytes()
	if cfg.Quant.On() {
		f := cfg.Float()
		n += f.WeightBytes()
	}
	return n
}

// MemoryError is returned when a model does not fit in the memory an
// evaluator has; the pipeline reports it as an infrastructure failure
// (another evaluator may hold it), never as a verdict on the schedule.
type MemoryError struct {
	Model     string
	Need      int64 // bytes
	Available int64 // bytes
	Source    string
	// HeldByOthers is the memory other evaluators of the host were
	// admitted and have not allocated yet (HostAdmission), already taken
	// out of Available.
	HeldByOthers int64
}

func (e *MemoryError) Error() string {
	others := ""
	if e.HeldByOthers > 0 {
		others = fmt.Sprintf(", less %d MiB admitted to other evaluators of this host", e.HeldByOthers>>20)
	}
	return fmt.Sprintf("model %s needs about %d MiB of host memory to check a trial, but this evaluator has %d MiB available (%s%s); refused before allocating",
		e.Model, e.Need>>20, e.Available>>20, e.Source, others)
}

// MemoryProbe reports how many bytes of host memory a model about to be
// loaded may use, and where that figure comes from (for messages).
type MemoryProbe func() (available int64, source string, err error)

// HostAdmission shares one host's memory between the evaluators running
// on it: each process probes the same free memory, so without a shared
// record two evaluators that check at the same moment both admit a model
// that only one of them can hold.
type HostAdmission interface {
	// Admit reserves need bytes for this evaluator when need fits in
	// available (this process's probe) less what the host's other
	// evaluators were admitted and have not allocated yet (heldByOthers).
	// The check and the reservation are one atomic step for the host.
	Admit(need, available int64) (ok bool, heldByOthers int64)
	// Release gives back bytes an earlier Admit reserved.
	Release(bytes int64)
}
