// Package tensor is the small dense-array type shared by the eager model, the
// reference VM and the GPU launcher: values with an ir.DType and a shape, and
// the storage rounding of docs/spec/ir.md §7 (compute in float32, round to the
// buffer's dtype when stored; bf16 and fp16 by round-to-nearest-even), and
// weights held at their stored width: bf16/fp16 as bit patterns (Tensor.Half),
// int8, uint8 and bool one byte per element (Tensor.Bytes), int4 packed two
// per byte (Tensor.Packed).
package tensor
