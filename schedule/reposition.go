package schedule

import (
	"fmt"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/pyjson"
)

// Reposition patches a lowered decode program for another position without
// re-lowering (docs/spec/rules.md R28): KV_APPEND pos, ATTENTION_TILE kv_start/kv_len and their
// cost estimates, meta pos/kv_len, and the SM placement (the load-balance
// policy weighs attention by its kv_len). The result equals Lower at the new
// position. It refuses, leaving the program untouched, when that would not
// hold: the program uses split-KV attention, or its config asks for split-KV
// at the new kv_len; the caller then re-lowers. pos must lie in
// [0, max_seq) of every KV cache.
func Reposition(p *ir.Program, pos int) error {
	kvLen := pos + 1
	for i := range p.Tasks {
		t := &p.Tasks[i]
		switch t.Op {
		case ir.OpAttentionCombine:
			return fmt.Errorf("task %d (%s): the program uses split-KV attention; re-lower it for pos=%d", i, t.Label, pos)
		case ir.OpAttentionTile:
			if t.Params.IntOr("flags", 0)&ir.FlagPartialWrite != 0 {
				return fmt.Errorf("task %d (%s): the program uses split-KV attention; re-lower it for pos=%d", i, t.Label, pos)
			}
		case ir.OpKVAppend:
			maxSeq, ok := cacheLength(p, t)
			if !ok {
				return fmt.Errorf("task %d (%s): KV_APPEND without a KV cache output", i, t.Label)
			}
			if pos < 0 || pos >= maxSeq {
				return fmt.Errorf("decode position pos=%d is outside [0, max_seq=%d)", pos, maxSeq)
			}
		}
	}
	replace := p.Config != nil && p.Target != nil
	if replace {
		if partitions(p.Config, p.Target.NumSMs, kvLen) > 1 {
			return fmt.Errorf("the config asks for split-KV attention at kv_len=%d; re-lower it for pos=%d", kvLen, pos)
		}
		// Placement fails only on a bad explicit pin, and does not depend on
		// the patched estimates: check it before touching anything.
		if _, err := placement(p, p.Config.SMAssignment, p.Target.NumSMs, false); err != nil {
			return err
		}
	}
	for i := range p.Tasks {
		t := &p.Tasks[i]
		switch t.Op {
		case ir.OpKVAppend:
			setParam(t, "pos", int64(pos))
		case ir.OpAttentionTile:
			setParam(t, "kv_start", 0)
			setParam(t, "kv_len", int64(kvLen))
			b, nkv, nh, hd := attentionDims(p, t)
			t.EstBytes = attentionBytes(b, kvLen, nkv, hd, dtypeBytes(p, t))
			t.EstFlops = attentionFlops(b, nh, hd, kvLen)
		}
	}
	if replace {
		sms, _ := placement(p, p.Config.SMAssignment, p.Target.NumSMs, false)
		for i := range p.Tasks {
			p.Tasks[i].SM = &sms[i]
		}
	}
	p.SetMeta("pos", intV(pos))
	p.SetMeta("kv_len", pyjson.IntValue(int64(kvLen)))
	return nil
}

// cacheLength is max_seq of the cache a KV_APPEND writes ((S, nkv, hd) or
// (B, S, nkv, hd)).
func cacheLength(p *ir.Program, t *ir.Task) (int, bool) {
	if len(t.Outputs) == 0 {
		return 0, false
	}
	b := p.Buffer(t.Outputs[0])
	if b == nil {
		return 0, false
	}
	switch len(b.Shape) {
	case 3:
		return b.Shape[0], true
	case 4:
		return b.Shape[1], true
	}
	return 0, false
}

// attentionDims reads B (from a rank-3 batched q), n_kv_heads, n_heads and
// head_dim of an ATTENTION_TILE.
func attentionDims(p *ir.Program, t *ir.Task) (b, nkv, nh, hd int) {
	b = 1
	if len(t.Inputs) > 0 {
		if q := p.Buffer(t.Inputs[0]); q != nil && len(q.Shape) == 3 {
			b = q.Shape[0]
		}
	}
	return b, int(t.Params.IntOr("n_kv_heads", 0)), int(t.Params.IntOr("n_heads", 0)), int(t.Params.IntOr("head_dim", 0))
}

func dtypeBytes(p *ir.Program, t *ir.Task) int64 {
	if len(t.Inputs) > 1 {
		if c := p.Buffer(t.Inputs[1]); c != nil {
			return int64(max(1, c.DType.Bits()/8))
		}
	}
	return 1
}

// setParam overwrites an integer param in place (or appends it).
func setParam(t *ir.Task, key string, v int64) {
	for i := range t.Params {
		if t.Params[i].Key == key {
			t.Params[i].Val = pyjson.IntValue(v)
			return
		}
	}
	t.Params = append(t.Params, ir.IntParam(key, v))
}
