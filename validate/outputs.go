package validate

import (
	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/pyjson"
)

// checkOutputs is step 9: every IO_OUTPUT buffer must be written by some task.
func (c *checker) checkOutputs() {
	for i := range c.p.Buffers {
		b := &c.p.Buffers[i]
		if b.Kind == ir.IOOutput && len(c.writers[i]) == 0 {
			c.errf(CodeOutputUnproduced, -1, b.ID, -1, "IO_OUTPUT buffer '%s'(#%d) is never produced", b.Name, b.ID)
		}
	}
}

// checkGPULabel is step 9's warning: flywheel rows take the GPU from
// target.name, so a different meta['gpu'] is misleading.
func (c *checker) checkGPULabel() {
	p := c.p
	if p.Target == nil {
		return
	}
	g, ok := p.Meta.Get("gpu")
	if !ok || !truthy(g) || (g.Kind == pyjson.String && g.S == p.Target.Name) {
		return
	}
	c.warnf(CodeGPULabel, -1, -1, -1, "meta['gpu']=%s != target.name=%s - flywheel rows derive GPU from target.name", pyRepr(g), pyStr(p.Target.Name))
}

// truthy is Python's truth value of a decoded JSON value.
func truthy(v pyjson.Value) bool {
	switch v.Kind {
	case pyjson.Bool:
		return v.B
	case pyjson.Int, pyjson.Float:
		f, ok := v.Float64()
		return ok && f != 0
	case pyjson.String:
		return v.S != ""
	case pyjson.Array:
		return len(v.Arr) > 0
	case pyjson.Object:
		return len(v.Obj) > 0
	}
	return false
}
