// Package filemap maps files read-only into memory, for the large inputs
// amk reads without copying them: a program file that amkctl validate
// decodes (Open, handing decoded pages back as it goes) and the stored
// weights trial evaluates with (Map and Unmap, the mapping shared by every
// evaluator of the host through the page cache).
//
// Mappings are read-only and shared with the page cache: nothing is ever
// written through them. Where the platform has no memory maps, Map reports
// ErrUnsupported and Open maps nothing, and the callers read the file
// instead.
package filemap
