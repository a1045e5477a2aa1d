package ir

import "fmt"

// Format and ABI versions. Minor bumps are additive; a major mismatch is
// refused on load.
const (
	IRVersion  = "0.2.0"
	ABIVersion = "0.2"
)

// ABI capacity limits (AMK_MAX_* in kernels/abi.h).
const (
	MaxInputs  = 8
	MaxOutputs = 4
	MaxWaits   = 8
	MaxRank    = 4
)

// DType is a buffer element type. Codes are canonical (amk_dtype_t).
type DType int

// DType codes.
const (
	F32 DType = iota
	F16
	BF16
	F8E4M3
	F8E5M2
	I32
	I8
	I4
	U8
	BOOL
)

var dtypeNames = [...]string{"F32", "F16", "BF16", "F8E4M3", "F8E5M2", "I32", "I8", "I4", "U8", "BOOL"}
var dtypeBits = [...]int{32, 16, 16, 8, 8, 32, 8, 4, 8, 8}

// DTypes lists every DType in code order.
func DTypes() []DType {
	out := make([]DType, len(dtypeNames))
	for i := range out {
		out[i] = DType(i)
	}
	return out
}

// Valid reports whether d is a defined code.
func (d DType) Valid() bool { return d >= 0 && int(d) < len(dtypeNames) }

func (d DType) String() string {
	if d.Valid() {
		return dtypeNames[d]
	}
	return fmt.Sprintf("DType(%d)", int(d))
}

// Bits is the storage width of one element.
func (d DType) Bits() int {
	if d.Valid() {
		return dtypeBits[d]
	}
	return 0
}

// NBytes is the storage size of count elements; sub-byte packed types round up.
func (d DType) NBytes(count int64) int64 { return (count*int64(d.Bits()) + 7) / 8 }

// IsFloat reports whether d holds floating-point values.
func (d DType) IsFloat() bool {
	switch d {
	case F32, F16, BF16, F8E4M3, F8E5M2:
		return true
	}
	return false
}

// IsInteger reports whether d holds integer values (ids, positions, quantised weights).
func (d DType) IsInteger() bool {
	switch d {
	case I32, I8, I4, U8:
		return true
	}
	return false
}

// ParseDType maps a name such as "BF16" to its DType.
func ParseDType(name string) (DType, error) {
	for i, n := range dtypeNames {
		if n == name {
			return DType(i), nil
		}
	}
	return 0, fmt.Errorf("unknown dtype %q", name)
}

// MemSpace is where a buffer lives. Codes are canonical (amk_memspace_t).
type MemSpace int

// MemSpace codes.
const (
	HBM MemSpace = iota
	GlobalScratch
	SMEM
	Register
)

var memSpaceNames = [...]string{"HBM", "GLOBAL_SCRATCH", "SMEM", "REGISTER"}

// MemSpaces lists every MemSpace in code order.
func MemSpaces() []MemSpace { return []MemSpace{HBM, GlobalScratch, SMEM, Register} }

// Valid reports whether s is a defined code.
func (s MemSpace) Valid() bool { return s >= 0 && int(s) < len(memSpaceNames) }

func (s MemSpace) String() string {
	if s.Valid() {
		return memSpaceNames[s]
	}
	return fmt.Sprintf("MemSpace(%d)", int(s))
}

// OnChip reports whether producer and consumer must share an SM.
func (s MemSpace) OnChip() bool { return s == SMEM || s == Register }

// ParseMemSpace maps a name such as "SMEM" to its MemSpace.
func ParseMemSpace(name string) (MemSpace, error) {
	for i, n := range memSpaceNames {
		if n == name {
			return MemSpace(i), nil
		}
	}
	return 0, fmt.Errorf("unknown memory space %q", name)
}

// BufferKind is a buffer's role. Codes are canonical.
type BufferKind int

// BufferKind codes.
const (
	Weight BufferKind = iota
	Activation
	KVCache
	IOInput
	IOOutput
	Const
)

var bufferKindNames = [...]string{"WEIGHT", "ACTIVATION", "KV_CACHE", "IO_INPUT", "IO_OUTPUT", "CONST"}

// BufferKinds lists every BufferKind in code order.
func BufferKinds() []BufferKind {
	return []BufferKind{Weight, Activation, KVCache, IOInput, IOOutput, Const}
}

// Valid reports whether k is a defined code.
func (k BufferKind) Valid() bool { return k >= 0 && int(k) < len(bufferKindNames) }

func (k BufferKind) String() string {
	if k.Valid() {
		return bufferKindNames[k]
	}
	return fmt.Sprintf("BufferKind(%d)", int(k))
}

// ReadOnly reports whether the kind is external read-only state that never
// needs a producer edge (WEIGHT, CONST, IO_INPUT).
func (k BufferKind) ReadOnly() bool { return k == Weight || k == Const || k == IOInput }

// ParseBufferKind maps a name such as "KV_CACHE" to its BufferKind.
func ParseBufferKind(name string) (BufferKind, error) {
	for i, n := range bufferKindNames {
		if n == name {
			return BufferKind(i), nil
		}
	}
	return 0, fmt.Errorf("unknown buffer kind %q", name)
}
