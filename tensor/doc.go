// Package tensor is the small dense-array type shared by the eager model, the
// reference VM and the GPU launcher: values with an ir.DType and a shape, and
// the storage rounding of docs/spec/ir.md §7 (compute in float32, round to the
// buffer's dtype when stored; bf16 and fp16 by round-to-nearest-even), and
// bf16/fp16 weights held at their stored width (Tensor.Half).
package tensor
