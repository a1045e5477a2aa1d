// Package inputfile reads the files amk is handed from outside: programs,
// model configs, task graphs, pipeline schedules, schedule configs,
// corpora, cost records, FlashInfer-Bench datasets, safetensors weights.
// It is the one place that opens them, so that every such read is bounded
// the same way:
//
//   - Only regular files are read. A named pipe, a device, a socket or a
//     directory given where a file is expected is refused at once with an
//     error that says what it is; opening never blocks (a FIFO with no
//     writer would otherwise hang the open, and /dev/zero would never end).
//   - A whole-file read is bounded: a regular file larger than the caller's
//     limit is refused before a byte is read, and one that grows past the
//     limit while it is read is cut off one byte past it.
//
// Standard input is read only where a caller asks for it: Read takes "-"
// for it (the command line's convention), bounded like a file; Open and
// ReadFile only open paths.
package inputfile
