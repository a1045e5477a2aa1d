// Package pyjson is an ordered JSON document model whose writer reproduces
// Python's json.dumps byte for byte.
//
// amk exchanges files with the Python reference implementation (AMK): program
// JSON written with json.dumps(indent=2) and schedule ids hashed from
// json.dumps(sort_keys=True). Go's encoding/json neither keeps object key
// order nor formats floats and escapes the way Python does, so this package
// owns both directions:
//
//   - Parse reads any JSON text into a Value tree that keeps member order and
//     the kind of every number (integer or float), with a bounded nesting depth
//     and offsets in its errors;
//   - Indent and Compact write a Value exactly as Python's json.dumps would
//     with indent=2 or with the default separators, ensure_ascii on, keys
//     optionally sorted recursively.
//
// Numbers are normalised on parse the way Python's json.loads/dumps pair
// normalises them (floats to their shortest repr with a ".0" or exponent,
// integers kept digit for digit), so decode then encode is idempotent.
package pyjson
