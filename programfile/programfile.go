// Package programfile reads the program files a user hands amk: an amk
// program (ir's JSON form) or a task graph of Mirage's persistent kernel,
// told apart by their content, bounded in size and items (ir.Limits), and
// checked — what amkctl validate, verify, ir and mpk do with a file.
//
// A large regular file in amk's plain program form is decoded straight
// from a memory map (filemap), handing each decoded MiB back to the kernel,
// so that its bytes are never held whole; anything else is read
// (inputfile) and decoded. Errors say what is wrong: the JSON path
// (ir.DecodeError), the byte offset of a syntax error, or the limit
// (inputfile.TooLargeError, ir.ErrTooLarge) a front can name its flag for.
package programfile

import (
	"encoding/json"
	"runtime/debug"

	"github.com/amk-dev/amk/filemap"
	"github.com/amk-dev/amk/inputfile"
	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/ir/mpk"
	"github.com/amk-dev/amk/validate"
)

// Load reads and decodes a program file ("-": standard input) within lim
// (zero fields: ir's defaults).
func Load(path string, lim ir.Limits) (*ir.Program, error) {
	data, err := read(path, lim)
	if err != nil {
		return nil, err
	}
	return ir.DecodeLimited(data, lim)
}

// read reads a program file of at most lim.MaxBytes (ir.MaxProgramBytes
// when zero).
func read(path string, lim ir.Limits) ([]byte, error) {
	if lim.MaxBytes <= 0 {
		lim.MaxBytes = ir.MaxProgramBytes
	}
	return inputfile.Read(path, lim.MaxBytes)
}

// ReadMPK reads and decodes a task-graph file.
func ReadMPK(path string) (*mpk.Graph, error) {
	data, err := inputfile.Read(path, mpk.MaxGraphBytes)
	if err != nil {
		return nil, err
	}
	return mpk.Decode(data)
}

// Checked is a file's check: its report as text and JSON, and whether it
// passed.
type Checked struct {
	// MPK is true for a task graph of Mirage's persistent kernel (checked
	// in MPK's terms for the launch of the options), false for an amk
	// program (validate's report).
	MPK  bool
	Text string
	JSON json.RawMessage
	OK   bool
}

// Check reads a file and checks it: a task graph of Mirage's persistent
// kernel (recognised by its keys) for the launch mpkOpt describes, or an
// amk program within lim. An unreadable or malformed file is an error; a
// program or graph that fails its checks is a Checked with OK false.
func Check(path string, mpkOpt mpk.CheckOptions, lim ir.Limits) (Checked, error) {
	// A program in amk's plain form is never a task graph (its decoder
	// refuses unknown keys such as all_tasks), and trying it first spares
	// the large files the search for an MPK key.
	p := decodeMapped(path, lim)
	if p == nil {
		data, err := read(path, lim)
		if err != nil {
			return Checked{}, err
		}
		var plain bool
		if p, plain = ir.DecodePlain(data, lim, nil); !plain {
			if mpk.Looks(data) {
				return checkMPK(data, mpkOpt)
			}
			if p, err = ir.DecodeLimited(data, lim); err != nil {
				return Checked{}, err
			}
		}
	}
	rep := validate.Validate(p)
	return Checked{Text: rep.String(), JSON: rep.JSON(), OK: rep.OK}, nil
}

// CheckMPK reads a file that must be a task graph of Mirage's persistent
// kernel and checks it for the launch opt describes. Anything else (an amk
// program included) is an error in a task graph's terms.
func CheckMPK(path string, opt mpk.CheckOptions) (Checked, error) {
	data, err := inputfile.Read(path, mpk.MaxGraphBytes)
	if err != nil {
		return Checked{}, err
	}
	return checkMPK(data, opt)
}

// checkMPK checks an MPK task graph; a malformed graph is an error.
func checkMPK(data []byte, opt mpk.CheckOptions) (Checked, error) {
	g, err := mpk.Decode(data)
	if err != nil {
		return Checked{}, err
	}
	rep := mpk.Check(g, opt)
	raw, err := json.Marshal(rep)
	return Checked{MPK: true, Text: rep.String(), JSON: raw, OK: rep.OK}, err
}

// MapMinBytes is the smallest file worth a memory map; smaller ones are read.
const MapMinBytes = 1 << 20

// decodeMapped decodes a large regular file in amk's plain program form
// straight from a memory map: nil for anything else (a small file,
// standard input, another document, an error), which the caller reads and
// decodes the usual way. The program holds no reference to the mapping. A
// file truncated while mapped faults on access; SetPanicOnFault turns that
// into a panic, which the decoder takes as giving up, and the caller's
// read reports the file as it now is.
func decodeMapped(path string, lim ir.Limits) *ir.Program {
	if path == "-" {
		return nil
	}
	m := filemap.Open(path, MapMinBytes, lim.MaxBytes)
	if m == nil {
		return nil
	}
	defer m.Close()
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	p, ok := ir.DecodePlain(m.Data, lim, m.Release)
	if !ok {
		return nil
	}
	return p
}
