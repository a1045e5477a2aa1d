package launch

import (
	"fmt"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/kernels"
)

// The buffers of a loaded program in device memory, as every device lays
// them out (the CUDA device's Load, the emulator's): the host-bound ones
// (weights, consts, IO inputs, KV caches) in allocations of their own, the
// others in the arena at their offset (kernels.Tables.ArenaOffset).

// bufferAddress is where buffer id lives: its own allocation (ext), else the
// arena at its offset.
func bufferAddress[P ~uint64 | ~uintptr](p *ir.Program, t *kernels.Tables, ext map[int]P, arena P, id int) (P, error) {
	if id < 0 || id >= len(p.Buffers) {
		return 0, fmt.Errorf("read: unknown buffer %d", id)
	}
	if at, ok := ext[id]; ok {
		return at, nil
	}
	return arena + P(t.ArenaOffset[id]), nil
}

// inputAddress is where a per-launch input goes: a host-bound buffer of
// exactly the buffer's size.
func inputAddress[P ~uint64 | ~uintptr](p *ir.Program, ext map[int]P, id int, data []byte) (P, error) {
	at, ok := ext[id]
	if !ok {
		return 0, fmt.Errorf("buffer %d is not host-bound", id)
	}
	if int64(len(data)) != p.Buffers[id].NBytes() {
		return 0, fmt.Errorf("buffer %d: %d bytes, want %d", id, len(data), p.Buffers[id].NBytes())
	}
	return at, nil
}

// handles are a device's loaded programs by handle.
type handles[P interface{ free() }] struct {
	progs map[Handle]P
	next  Handle
}

// add keeps p under a new handle.
func (t *handles[P]) add(p P) Handle {
	if t.progs == nil {
		t.progs = map[Handle]P{}
	}
	h := t.next
	t.next++
	t.progs[h] = p
	return h
}

// get is the program of h.
func (t *handles[P]) get(h Handle) (P, error) {
	p, ok := t.progs[h]
	if !ok {
		return p, fmt.Errorf("unknown handle %d", h)
	}
	return p, nil
}

// remove frees the program of h and forgets it.
func (t *handles[P]) remove(h Handle) error {
	p, err := t.get(h)
	if err != nil {
		return err
	}
	p.free()
	delete(t.progs, h)
	return nil
}

// clear frees every program.
func (t *handles[P]) clear() {
	for h, p := range t.progs {
		p.free()
		delete(t.progs, h)
	}
}
