package validate

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/pyjson"
)

// TestSpecVector checks the reference validator's test vector: the exact report line, and a
// byte-stable round trip that stays valid.
func TestSpecVector(t *testing.T) {
	p := spec23Vector(t)
	rep := Validate(p)
	want := "[VALID] {'tasks': 2, 'buffers': 4, 'counters': 2, 'edges': 1, 'acyclic': True, 'weight_MB': 0.0, 'sm_assigned': False}"
	if got := rep.String(); got != want {
		t.Fatalf("report:\n got %s\nwant %s", got, want)
	}
	s := ir.Encode(p)
	p2, err := ir.Decode(s)
	if err != nil {
		t.Fatal(err)
	}
	if s2 := ir.Encode(p2); !bytes.Equal(s, s2) {
		t.Fatal("to_json -> from_json -> to_json is not byte-identical")
	}
	if !Validate(p2).OK {
		t.Fatal("reloaded program is no longer valid")
	}
}

// TestIRSmoke is test_ir_smoke.py.
func TestIRSmoke(t *testing.T) {
	p := irSmokeChain(t)
	if rep := Validate(p); !rep.OK {
		t.Fatal(rep.String())
	}
	if order := ir.BuildGraph(p).TopologicalOrder(); len(order) != 3 {
		t.Fatalf("topological order %v", order)
	}
	if order, stuck := ir.SimulateCounters(p); len(stuck) != 0 || len(order) != 3 {
		t.Fatalf("simulate: order %v stuck %v", order, stuck)
	}

	cyc := irSmokeBackEdge(t)
	rep := Validate(cyc)
	if rep.OK || !strings.Contains(rep.Reason(0), "CYCLE") {
		t.Fatalf("back edge not rejected as a CYCLE:\n%s", rep.String())
	}
	if _, stuck := ir.SimulateCounters(cyc); len(stuck) == 0 {
		t.Fatal("a cyclic program must leave tasks stuck")
	}

	rep = Validate(irSmokeThreshold5(t))
	if rep.OK || !strings.Contains(rep.Reason(0), "unsatisfiable") {
		t.Fatalf("threshold 5 not unsatisfiable:\n%s", rep.String())
	}

	s := ir.Encode(p)
	p2, err := ir.Decode(s)
	if err != nil {
		t.Fatal(err)
	}
	if !Validate(p2).OK || !bytes.Equal(ir.Encode(p2), s) || len(p2.Tasks) != 3 {
		t.Fatal("JSON round trip is not stable and valid")
	}
}

// TestHugeCycle is test_validator_races.py's 5000-node cycle: rejected with a
// full witness, no stack overflow.
func TestHugeCycle(t *testing.T) {
	const n = 5000
	b := newBuilder(t, "rtx5090")
	o := b.buf("o", ir.IOOutput, 1)
	for range n {
		b.ctr()
	}
	for i := range n {
		out := o
		if i > 0 {
			out = b.buf("a"+itoa(int64(i)), ir.Activation, 1)
		}
		b.task(ir.OpCOPY, ints(o), ints(out), i, waits((i+n-1)%n, 1), "n"+itoa(int64(i)))
	}
	rep := Validate(b.p)
	if rep.OK || !rep.Has(CodeCycle) {
		t.Fatalf("want a cycle: %s", rep.Reason(3))
	}
	var msg string
	for _, e := range rep.Errors {
		if e.Code == CodeCycle {
			msg = e.Message
		}
	}
	if !strings.HasPrefix(msg, "producer→consumer graph has a CYCLE, structural deadlock. cycle: 0:n0 -> 1:n1 -> 2:n2") ||
		!strings.HasSuffix(msg, "4998:n4998 -> 4999:n4999 -> 0:n0") || strings.Count(msg, " -> ") != n {
		t.Fatalf("witness: %.200s ... %s", msg, msg[max(0, len(msg)-100):])
	}
}

// TestAdditiveFields is test 11: unknown target/config keys load and are dropped.
func TestAdditiveFields(t *testing.T) {
	data := encodeCase(t, goldenCase{build: additiveFields, raw: addUnknownKeys})
	if !bytes.Contains(data, []byte("future_tensor_mem_kb")) || !bytes.Contains(data, []byte("made_up_search_dim")) {
		t.Fatal("test document lacks the unknown keys")
	}
	p, err := ir.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	if p.Target == nil || p.Target.Name != "rtx5090" {
		t.Fatalf("target %+v", p.Target)
	}
	if out := ir.Encode(p); bytes.Contains(out, []byte("future_tensor_mem_kb")) || bytes.Contains(out, []byte("made_up_search_dim")) {
		t.Fatal("unknown keys survived a round trip")
	}
	if !Validate(p).OK {
		t.Fatal("additive program rejected")
	}
}

// TestMessages pins the reference's templates (checked against the Python
// reference validator on the same programs).
func TestMessages(t *testing.T) {
	for _, tc := range []struct {
		build func(testing.TB) *ir.Program
		want  string
	}{
		{func(t testing.TB) *ir.Program { return tiledGEMV(t, 4, 2, 2, false) },
			"task 4 (reader) partial wait threshold 2 on shared counter 0 (4 producers), ambiguous which-producer RACE; a shared counter must be an all-join (threshold == 4)"},
		{missingHappensBefore, "task 2 (t2) reads buffer #2 ('actA') but writer task(s) [0] are NOT ordered before it, data RACE"},
		{kvReadBeforeAppend, "task 1 (reads_kv_unordered) reads KV cache #1 ('kv') but writer task(s) [0] are NOT ordered before it, data RACE"},
		{unorderedWriters, "multi-writer WAW race on buffer #2 ('a'): writers 0 ('wa') and 1 ('wb') share no counter; neither is ordered happens-before the other, write-after-write RACE"},
		{func(t testing.TB) *ir.Program { return tiledGEMV(t, 2, 2, 4, true) },
			"multi-writer WAW race on buffer #2 ('y'): writers 0 ('tile0') and 1 ('tile1') share a counter but their tiles OVERLAP; neither is ordered happens-before the other, write-after-write RACE"},
		{capacityOverflow, "task 0 has 9 inputs > ABI_MAX_INPUTS=8; task 0 (ALLREDUCE_SHARD) arity: 9 inputs, expected [1,8]"},
		{irSmokeBackEdge, "producer→consumer graph has a CYCLE, structural deadlock. cycle: 0:rmsnorm -> 1:gemv -> 2:residual -> 0:rmsnorm"},
		{irSmokeThreshold5, "task 1 (gemv) threshold 5 > 1 producers of counter 0, unsatisfiable (deadlock)"},
		{waitWithoutProducer, "task 1 (copy) waits on counter 2 with NO producer, unsatisfiable (deadlock)"},
		{selfWait, "task 1 (copy) waits on its OWN out_counter 1, self-deadlock; producer→consumer graph has a CYCLE, structural deadlock. cycle: 1:copy -> 1:copy"},
		{zeroThreshold, "task 1 (copy) threshold 0 on counter 0 is not a positive static int"},
		{rank5, "task 0 buffer 0 rank 5 > ABI_MAX_RANK=4"},
		{gemvWithoutK, "task 0 (GEMV_TILE) missing required param 'K'"},
		{func(t testing.TB) *ir.Program { return normParam(t, "hidden", pyjson.FloatValue(8)) }, "task 0 param 'hidden'=8.0 must be an int32"},
		{func(t testing.TB) *ir.Program { return normParam(t, "eps", pyjson.BoolValue(true)) }, "task 0 param 'eps'=True must be a real number"},
		{func(t testing.TB) *ir.Program { return normParam(t, "eps", pyjson.StringValue("x")) }, "task 0 param 'eps'='x' must be a real number"},
		{readsUnwritten, "task 0 (copy) reads buffer #0 ('a') that is never produced"},
		{func(t testing.TB) *ir.Program { return onChip(t, new(0), new(1)) },
			"on-chip buffer 'h'(#2, SMEM) is used across SMs [0, 1], counters give ordering, not cross-SM data; promote to GLOBAL_SCRATCH/HBM or co-locate on one SM"},
		{queueOrder, "SM 3 queue order violates dependency 1->0 (producer must precede consumer in the same SM's serial queue)"},
		{smOutOfRange, "task 0 assigned to SM 999 out of range [0,82)"},
		{unorderedPages, "page 0 reused by buffers #2 ('h1') and #3 ('h2') whose live ranges are NOT ordered, clobber RACE (page reuse needs separated ranges)"},
		{outputUnproduced, "IO_OUTPUT buffer 'logits'(#4) is never produced"},
		{readsMissing, "task 1 (copy) reads missing buffer 99"},
		{incrementsMissing, "task 1 (copy) increments missing counter 7"},
		{rmsnormOneInput, "task 0 (RMSNORM) arity: 1 inputs, expected [2,2]"},
		{inPlaceRead, "task 0 (accumulate) reads buffer #1 ('a') in place with no external producer (reads its own uninitialized output?): no write precedes the read, data RACE"},
	} {
		if got := Validate(tc.build(t)).Reason(0); got != tc.want && !strings.HasPrefix(got, tc.want+"; ") {
			t.Errorf("reason:\n got %s\nwant %s", got, tc.want)
		}
	}
	for _, tc := range []struct {
		build func(testing.TB) *ir.Program
		want  string
	}{
		{gpuLabel, "meta['gpu']='h100' != target.name='rtx5090' - flywheel rows derive GPU from target.name"},
		{unknownParam, "task 0 (RMSNORM) param 'alpha' is not a known amk_params_t field (will not marshal to the device)"},
		{func(t testing.TB) *ir.Program { return onChip(t, nil, nil) }, "on-chip buffer 'h'(#2) requires same-SM placement (unverified until sm_assignment runs)"},
	} {
		rep := Validate(tc.build(t))
		if len(rep.Warnings) != 1 || rep.Warnings[0].Message != tc.want {
			t.Errorf("warnings %+v, want %s", rep.Warnings, tc.want)
		}
	}
}

func TestDiagnosticFields(t *testing.T) {
	rep := Validate(missingHappensBefore(t))
	if len(rep.Errors) != 1 {
		t.Fatal(rep.String())
	}
	if d := rep.Errors[0]; d.Code != CodeRaceRAW || d.Task != 2 || d.Buffer != 2 || d.Counter != -1 {
		t.Fatalf("diagnostic %+v", d)
	}
	rep = Validate(waitWithoutProducer(t))
	if d := rep.Errors[0]; d.Code != CodeUnsatisfiable || d.Task != 1 || d.Counter != 2 || d.Buffer != -1 {
		t.Fatalf("diagnostic %+v", d)
	}
}

func TestReportJSONAndReason(t *testing.T) {
	rep := Validate(capacityOverflow(t))
	var got struct {
		OK       bool
		Errors   []Diagnostic
		Warnings []Diagnostic
		Stats    map[string]any
	}
	if err := json.Unmarshal(rep.JSON(), &got); err != nil {
		t.Fatal(err)
	}
	if got.OK || len(got.Errors) != 2 || got.Errors[0].Code != CodeABICap || got.Warnings == nil {
		t.Fatalf("json %+v", got)
	}
	for _, k := range []string{"tasks", "buffers", "counters", "edges", "acyclic", "weight_MB", "sm_assigned"} {
		if _, ok := got.Stats[k]; !ok {
			t.Errorf("stats lack %s", k)
		}
	}
	if r := rep.Reason(1); r != "task 0 has 9 inputs > ABI_MAX_INPUTS=8" {
		t.Fatalf("Reason(1) = %q", r)
	}
	if !strings.HasPrefix(rep.String(), "[REJECTED] {'tasks': 1, 'buffers': 10,") || !strings.Contains(rep.String(), "\n  ERROR: task 0 has 9 inputs") {
		t.Fatalf("text:\n%s", rep.String())
	}
}

func TestWeightMB(t *testing.T) {
	b := newBuilder(t, "")
	b.bufOf("w", ir.Weight, ir.BF16, 1000, 140) // 280,000 bytes
	b.bufOf("q", ir.Weight, ir.I4, 3, 5)        // 15 nibbles = 8 bytes
	if got := Validate(b.p).Stats.WeightMB; got != 0.28 {
		t.Fatalf("weight_MB %v", got)
	}
	b.bufOf("big", ir.Weight, ir.F32, 5000, 1000) // +20 MB; 0.280008+20 -> 20.28
	if got := Validate(b.p).Stats.String(); !strings.Contains(got, "'weight_MB': 20.28,") {
		t.Fatalf("stats %s", got)
	}
}

// TestDecodeShapedValid checks the benchmark programs: valid at 1k and at
// the reference's 8B shape, with and without a page allocation.
func TestDecodeShapedValid(t *testing.T) {
	for _, s := range []decodeShape{llama8B(2), withPages(llama8B(3)), llama8B(32)} {
		p := buildDecode(s)
		rep := Validate(p)
		if !rep.OK || len(rep.Warnings) != 0 {
			t.Fatalf("%d tasks: %s", len(p.Tasks), rep.Reason(5))
		}
	}
	if n := len(buildDecode(llama8B(32)).Tasks); n != 14786 {
		t.Fatalf("8B shape has %d tasks, want 14786", n)
	}
}

// TestNoTaskCap injects one hazard deep into a program above the reference's
// 8000-task cap: each is found, and nothing is skipped.
func TestNoTaskCap(t *testing.T) {
	findTask := func(p *ir.Program, label string) int {
		for i := range p.Tasks {
			if p.Tasks[i].Label == label {
				return i
			}
		}
		t.Fatalf("no task %s", label)
		return -1
	}
	for _, tc := range []struct {
		code   string
		inject func(p *ir.Program)
	}{
		{CodeRaceRAW, func(p *ir.Program) { // the residual add forgets the down projection
			i := findTask(p, "L18.mlp_residual")
			p.Tasks[i].Waits = p.Tasks[i].Waits[:1]
		}},
		{CodeRaceKV, func(p *ir.Program) { // attention forgets the v append
			i := findTask(p, "L19.attention")
			p.Tasks[i].Waits = p.Tasks[i].Waits[:2]
		}},
		{CodeRaceWAW, func(p *ir.Program) { // two down tiles write the same columns
			i := findTask(p, "L17.down_proj[t5]")
			p.Tasks[i].Params[2] = ir.IntParam("n_off", 0)
		}},
		{CodePageAlias, func(p *ir.Program) { // layer 19's q and k (written concurrently) share a page
			var q, k int
			for b := range p.Buffers {
				switch p.Buffers[b].Name {
				case "L19.q":
					q = b
				case "L19.k":
					k = b
				}
			}
			p.Pages = &ir.PageAllocation{BufferToPage: []ir.PageBinding{{Buffer: q, Page: 0}, {Buffer: k, Page: 0}},
				Pages: []ir.Page{{ID: 0, Space: ir.GlobalScratch, NBytes: 1 << 20, LiveStart: -1, LiveEnd: -1}}}
		}},
	} {
		p := buildDecode(llama8B(20))
		if len(p.Tasks) <= 8000 {
			t.Fatalf("%d tasks", len(p.Tasks))
		}
		tc.inject(p)
		rep := Validate(p)
		if rep.OK || !rep.Has(tc.code) {
			t.Errorf("%s not found in %d tasks: %s", tc.code, len(p.Tasks), rep.Reason(3))
		}
		for _, w := range rep.Warnings {
			if strings.Contains(w.Message, "SKIPPED") {
				t.Errorf("a proof was skipped: %s", w.Message)
			}
		}
	}
}

func TestDeterministicAndPure(t *testing.T) {
	for _, g := range goldenCases {
		p := g.build(t)
		before := ir.Encode(p)
		a, b := Validate(p), Validate(p)
		if !reflect.DeepEqual(a, b) {
			t.Errorf("%s: two runs differ", g.name)
		}
		if !bytes.Equal(before, ir.Encode(p)) {
			t.Errorf("%s: Validate mutated the program", g.name)
		}
	}
}

// TestNeverPanics feeds programs no decoder would produce.
func TestNeverPanics(t *testing.T) {
	if rep := Validate(nil); rep.OK || rep.Errors[0].Code != CodeNilProgram {
		t.Fatalf("nil: %+v", rep)
	}
	neg := -3
	huge := int(^uint(0) >> 1)
	mutations := []func(p *ir.Program){
		func(p *ir.Program) { p.Tasks[0].Op = ir.Op(99) },
		func(p *ir.Program) { p.Tasks[0].Op = ir.Op(-1) },
		func(p *ir.Program) { p.Buffers[0].Shape = []int{-1, 8} },
		func(p *ir.Program) { p.Buffers[2].Shape = []int{huge, huge, huge} },
		func(p *ir.Program) { p.Buffers[2].Shape = []int{} },
		func(p *ir.Program) { p.Buffers[2].Shape = []int{0, 0} },
		func(p *ir.Program) { p.Buffers[2].DType = ir.DType(77) },
		func(p *ir.Program) { p.Buffers[2].Kind = ir.BufferKind(-4) },
		func(p *ir.Program) { p.Buffers[2].Space = ir.MemSpace(9) },
		func(p *ir.Program) { p.Tasks[1].Inputs = []int{-5, huge} },
		func(p *ir.Program) { p.Tasks[1].Outputs = nil },
		func(p *ir.Program) { p.Tasks[0].OutCounter = -1 },
		func(p *ir.Program) {
			p.Tasks[1].Waits = []ir.Wait{{Counter: huge, Threshold: huge}, {Counter: -2, Threshold: -huge - 1}}
		},
		func(p *ir.Program) { p.Tasks[0].SM = &neg },
		func(p *ir.Program) { p.Tasks[0].SM = &huge; p.Target = nil },
		func(p *ir.Program) { p.Tasks[0].ID = -7; p.Counters[0].ID = huge },
		func(p *ir.Program) { p.Tasks = append(p.Tasks, p.Tasks...) },
		func(p *ir.Program) { p.Counters = nil },
		func(p *ir.Program) { p.Buffers = nil },
		func(p *ir.Program) { p.Meta = pyjson.Value{} },
		func(p *ir.Program) {
			p.Meta = pyjson.ObjectValue(pyjson.M("gpu", pyjson.ArrayValue(pyjson.NullValue())))
		},
		func(p *ir.Program) {
			p.Pages = &ir.PageAllocation{BufferToPage: []ir.PageBinding{{Buffer: -1, Page: 5}, {Buffer: 2, Page: huge}, {Buffer: 2, Page: 1}, {Buffer: 3, Page: 1}}}
		},
		func(p *ir.Program) {
			p.Tasks[0].Params = ir.Params{{Key: "hidden", Val: pyjson.Value{Kind: pyjson.Int, Num: "99999999999999999999999"}},
				{Key: "eps", Val: pyjson.Value{Kind: pyjson.Float, Num: "-Infinity"}}, {Key: "hidden", Val: pyjson.ObjectValue()}}
		},
		func(p *ir.Program) {
			p.Tasks[0].Op, p.Tasks[0].Params = ir.OpAttentionTile, ir.Params{iP("head_dim", 0), iP("n_heads", 0), iP("n_kv_heads", 0), iP("kv_start", -1), iP("kv_len", 1<<31-1)}
			p.Tasks[0].Inputs = []int{0, 2, 2}
		},
		func(p *ir.Program) {
			p.Tasks[0].Op, p.Tasks[0].Params = ir.OpGEMMTile, ir.Params{iP("K", 1<<31-1), iP("N_tile", 1<<31-1), iP("n_off", 1<<31-1), iP("M_tile", -1), iP("m_off", 1<<31-1)}
		},
		func(p *ir.Program) {
			p.Tasks[0].Op, p.Tasks[0].Params = ir.OpKVAppend, ir.Params{iP("pos", -1<<31)}
			p.Buffers[2].Shape = []int{0, 0, 0}
		},
		func(p *ir.Program) {
			p.Tasks[0].Op, p.Tasks[0].Params = ir.OpAttentionCombine, ir.Params{iP("head_dim", -2)}
		},
		func(p *ir.Program) { p.Tasks[0].Op, p.Tasks[0].Params = ir.OpEMBED, ir.Params{iP("hidden", 3)} },
		func(p *ir.Program) { p.Tasks[0].Op, p.Tasks[0].Params = ir.OpROPE, ir.Params{iP("head_dim", 3)} },
	}
	for i, m := range mutations {
		p := normChain(t, rmsParams(8)...).p
		m(p)
		rep := Validate(p)
		if rep.Has(CodeInternal) {
			t.Errorf("mutation %d hit the panic guard: %s", i, rep.Reason(0))
		}
	}
}
