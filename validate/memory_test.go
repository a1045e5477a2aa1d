package validate

import (
	"strings"
	"testing"

	"github.com/amk-dev/amk/ir"
)

// copyIntoWeight is the program a COPY corrupts: it overwrites the weight w
// with the input x, and the ADD that reads w (ordered after the COPY, so no
// race) then computes with the input instead of the weight.
func copyIntoWeight(t testing.TB) *ir.Program {
	b := newBuilder(t, "rtx5090")
	x := b.buf("x", ir.IOInput, 1, 8)
	w := b.buf("embed.weight", ir.Weight, 1, 8)
	o := b.buf("o", ir.IOOutput, 1, 8)
	c0, c1 := b.ctr(), b.ctr()
	b.task(ir.OpCOPY, ints(x), ints(w), c0, nil, "overwrite")
	b.task(ir.OpADD, ints(w, x), ints(o), c1, waits(c0, 1), "add")
	return b.p
}

// normWritesInput is an RMSNORM that writes its result over its own input
// x (an IO_INPUT), which the COPY after it then reads.
func normWritesInput(t testing.TB) *ir.Program {
	b := newBuilder(t, "rtx5090")
	x := b.buf("x", ir.IOInput, 1, 8)
	w := b.buf("w", ir.Weight, 8)
	o := b.buf("o", ir.IOOutput, 1, 8)
	c0, c1 := b.ctr(), b.ctr()
	b.task(ir.OpRMSNORM, ints(x, w), ints(x), c0, nil, "norm", rmsParams(8)...)
	b.task(ir.OpCOPY, ints(x), ints(o), c1, waits(c0, 1), "copy")
	return b.p
}

// copyIntoConst writes a CONST buffer.
func copyIntoConst(t testing.TB) *ir.Program {
	b := newBuilder(t, "rtx5090")
	x := b.buf("x", ir.IOInput, 1, 8)
	k := b.buf("scale.const", ir.Const, 1, 8)
	o := b.buf("o", ir.IOOutput, 1, 8)
	c0, c1 := b.ctr(), b.ctr()
	b.task(ir.OpCOPY, ints(x), ints(k), c0, nil, "overwrite")
	b.task(ir.OpADD, ints(k, x), ints(o), c1, waits(c0, 1), "add")
	return b.p
}

// counterInit3 is the spec's test vector with the norm's counter starting
// at 3: the file says the ADD may run at once, the device (which zeroes
// every counter before a launch) makes it wait for the norm.
func counterInit3(t testing.TB) *ir.Program {
	p := spec23Vector(t)
	p.Counters[0].Init = 3
	return p
}

// queueDeadlockAcrossSMs places two tasks on SM 0 and one on SM 1 so that
// no same-SM edge points backwards, yet SM 0's queue deadlocks: it runs
// "first" (waiting for "middle" on SM 1, which waits for "last") before
// "last", which sits behind "first" in the same queue.
func queueDeadlockAcrossSMs(t testing.TB) *ir.Program {
	b := newBuilder(t, "rtx5090")
	x := b.buf("x", ir.IOInput, 1, 8)
	w := b.buf("w", ir.Weight, 8)
	h1 := b.buf("h1", ir.Activation, 1, 8)
	h2 := b.buf("h2", ir.Activation, 1, 8)
	o := b.buf("o", ir.IOOutput, 1, 8)
	cFirst, cMiddle, cLast := b.ctr(), b.ctr(), b.ctr()
	b.task(ir.OpCOPY, ints(h2), ints(o), cFirst, waits(cMiddle, 1), "first")
	b.task(ir.OpCOPY, ints(h1), ints(h2), cMiddle, waits(cLast, 1), "middle")
	b.task(ir.OpRMSNORM, ints(x, w), ints(h1), cLast, nil, "last", rmsParams(8)...)
	b.p.Tasks[0].SM, b.p.Tasks[1].SM, b.p.Tasks[2].SM = new(0), new(1), new(0)
	return b.p
}

// TestMemoryModel: weights, constants and inputs are never written, and
// counters start at 0 (docs/spec/rules.md R31).
func TestMemoryModel(t *testing.T) {
	for _, tc := range []struct {
		name  string
		build func(testing.TB) *ir.Program
		code  string
		says  string
	}{
		{"COPY writes a WEIGHT", copyIntoWeight, CodeReadOnlyWrite, "writes WEIGHT buffer #1 ('embed.weight')"},
		{"RMSNORM writes its IO_INPUT", normWritesInput, CodeReadOnlyWrite, "writes IO_INPUT buffer #0 ('x')"},
		{"COPY writes a CONST", copyIntoConst, CodeReadOnlyWrite, "writes CONST buffer #1 ('scale.const')"},
		{"counter with init 3", counterInit3, CodeCounterInit, "counter 0 starts at 3"},
		{"a task reads what only it writes", inPlaceRead, CodeSelfRead, "no write precedes the read"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := Validate(tc.build(t))
			if rep.OK || !rep.Has(tc.code) {
				t.Fatalf("want %s, got:\n%s", tc.code, rep.String())
			}
			if !strings.Contains(rep.String(), tc.says) {
				t.Fatalf("the report does not say %q:\n%s", tc.says, rep.String())
			}
		})
	}
	// The same programs with the write going to an activation, and the
	// counter at 0, are valid: the rule refuses the write, nothing else.
	p := copyIntoWeight(t)
	p.Buffers[1].Kind, p.Buffers[1].Source = ir.Activation, nil
	if rep := Validate(p); !rep.OK {
		t.Fatalf("the COPY into an activation should be valid:\n%s", rep.String())
	}
	if rep := Validate(spec23Vector(t)); !rep.OK {
		t.Fatalf("spec vector: %s", rep.String())
	}
}

// TestQueueDeadlockThroughAnotherSM: an SM's queue blocks when a task in it
// waits, through tasks on other SMs, for a task behind it in the same queue.
// No single dependency between two tasks of one SM points backwards, so
// only the queues together with the dependency graph show it.
func TestQueueDeadlockThroughAnotherSM(t *testing.T) {
	p := queueDeadlockAcrossSMs(t)
	rep := Validate(p)
	if rep.OK || !rep.Has(CodeSMQueueOrder) {
		t.Fatalf("want %s, got:\n%s", CodeSMQueueOrder, rep.String())
	}
	for _, want := range []string{"SM 0", "task 0", "task 2", "1:middle"} {
		if !strings.Contains(rep.String(), want) {
			t.Fatalf("the report does not say %q:\n%s", want, rep.String())
		}
	}
	// The device model agrees: SM 0's queue never gets past task 0.
	if _, stuck := ir.SimulateQueues(p, 0); len(stuck) != 3 {
		t.Fatalf("queue simulation: stuck %v, want all three tasks", stuck)
	}
	// One task per SM cannot block a queue.
	p.Tasks[2].SM = new(2)
	if rep := Validate(p); !rep.OK {
		t.Fatalf("one task per SM cannot deadlock:\n%s", rep.String())
	}
	if _, stuck := ir.SimulateQueues(p, 0); len(stuck) != 0 {
		t.Fatalf("queue simulation: stuck %v with one task per SM", stuck)
	}
}

// gemvRank1Weight is a GEMV tile whose weight is a norm vector [8]: read as
// rows of K=8 values it has one row, not the tile's eight (found by the
// differential check: the VM refused the tile).
func gemvRank1Weight(t testing.TB) *ir.Program {
	b := newBuilder(t, "rtx5090")
	x := b.buf("x", ir.IOInput, 1, 8)
	w := b.buf("norm.w", ir.Weight, 8)
	o := b.buf("o", ir.IOOutput, 1, 8)
	b.task(ir.OpGEMVTile, ints(x, w), ints(o), b.ctr(), nil, "proj", gemvParams(8, 8, 0)...)
	return b.p
}

// copyBroadcast copies x [1, 8] into o [4, 8]: torch's copy_ would repeat
// the row, amk's VM and kernels copy element for element and refuse it
// (found by the differential check).
func copyBroadcast(t testing.TB) *ir.Program {
	b := newBuilder(t, "rtx5090")
	x := b.buf("x", ir.IOInput, 1, 8)
	o := b.buf("o", ir.IOOutput, 4, 8)
	b.task(ir.OpCOPY, ints(x), ints(o), b.ctr(), nil, "copy")
	return b.p
}

// addIntoLarger adds two [1, 8] rows into a [2, 8] output.
func addIntoLarger(t testing.TB) *ir.Program {
	b := newBuilder(t, "rtx5090")
	x := b.buf("x", ir.IOInput, 1, 8)
	o := b.buf("o", ir.IOOutput, 2, 8)
	b.task(ir.OpADD, ints(x, x), ints(o), b.ctr(), nil, "add")
	return b.p
}

// embedScalarTable gathers from a rank-0 table.
func embedScalarTable(t testing.TB) *ir.Program {
	b := newBuilder(t, "rtx5090")
	ids := b.bufOf("ids", ir.IOInput, ir.I32, 1)
	table := b.buf("table", ir.Weight)
	o := b.buf("o", ir.IOOutput, 1, 1)
	b.task(ir.OpEMBED, ints(ids, table), ints(o), b.ctr(), nil, "embed", iP("hidden", 1))
	return b.p
}
