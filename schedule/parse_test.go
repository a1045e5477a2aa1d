package schedule

import (
	"strings"
	"testing"

	"github.com/amk-dev/amk/pyjson"
)

func TestParsePointDefaults(t *testing.T) {
	p, err := ParsePoint([]byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	if p.ID() != Default().ID() {
		t.Errorf("{} parses to %s, want the default %s", p.ID(), Default().ID())
	}
	// The reference's default_config dict without knobs is the default point.
	p, err = ParsePoint([]byte(`{"tiling": {"gemv": {"N_tile": 64}, "attention": {"kv_block": 128}},
		"fusion_grouping": [], "sm_assignment": "load_balance", "pipelining_depth": 2,
		"page_allocation": "graph_color", "threads_per_block": 256, "smem_bytes_per_block": 0,
		"future_knob": {"x": 1}, "kernel_knobs": {"cpasync": 1}}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := p.ID(); got != "sch_c3af28020e" {
		t.Errorf("default_config dict parses to %s, want the reference's sch_c3af28020e", got)
	}
	if _, ok := p.Value().Get("future_knob"); ok {
		t.Error("an unknown top-level key survived parsing")
	}
}

func TestParsePointRejects(t *testing.T) {
	cases := []struct{ json, want string }{
		{`{"pipelining_depth": "deep"}`, "pipelining_depth='deep' must be a non-negative int"},
		{`{"pipelining_depth": -1}`, "pipelining_depth=-1 must be a non-negative int"},
		{`{"pipelining_depth": 9}`, "pipelining_depth=9 exceeds the maximum 8"},
		{`{"pipelining_depth": true}`, "pipelining_depth=True must be a non-negative int"},
		{`{"tiling": {"gemv": {"N_tile": -16}}}`, "tiling['gemv']['N_tile']=-16 must be a positive int"},
		{`{"tiling": {"gemv": {"N_tile": 64.0}}}`, "tiling['gemv']['N_tile']=64.0 must be a positive int"},
		{`{"tiling": "not-a-dict"}`, "tiling must be an object, got str"},
		{`{"tiling": {"gemv": 64}}`, "tiling['gemv'] must be an object"},
		{`{"threads_per_block": "256"}`, "threads_per_block='256' must be an int"},
		{`{"smem_bytes_per_block": 1e9}`, "smem_bytes_per_block=1000000000.0 must be an int"},
		{`{"page_allocation": "buddy"}`, "page_allocation='buddy' is not a known policy"},
		{`{"page_allocation": 3}`, "page_allocation=3 must be a string"},
		{`{"fusion_grouping": "gate+up"}`, "fusion_grouping must be a list of groups, got str"},
		{`{"fusion_grouping": [["gate", "nonsense"]]}`, "fusion_grouping[0][1]='nonsense' is not a known op-group name"},
		{`{"sm_assignment": "fastest"}`, "sm_assignment='fastest' is not a known policy"},
		{`{"sm_assignment": {"x": 1}}`, "sm_assignment key 'x' is not a non-negative integer task id"},
		{`{"sm_assignment": {"3": -1}}`, "sm_assignment['3']=-1 must be a non-negative int"},
		{`{"sm_assignment": 5}`, "sm_assignment=5 must be a policy string or a {task_id: sm} map"},
		{`{"kernel_knobs": "fast"}`, "kernel_knobs must be an object, got str"},
		{`{"kernel_knobs": {"warp_magic": 1}}`, "kernel_knobs: unknown knob 'warp_magic'"},
		{`{"kernel_knobs": {"cols_per_warp": 99}}`, "kernel_knobs['cols_per_warp']=99 is out of the validated range [1,16]"},
		{`{"kernel_knobs": {"lb_maxthreads": 256}}`, "lb_maxthreads and lb_minblocks must be both > 0 or both 0"},
		{`[1, 2]`, "expected a JSON object, got list"},
		{`{"tiling": `, "malformed ScheduleConfig"},
	}
	for _, c := range cases {
		_, err := ParsePoint([]byte(c.json))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParsePoint(%s) error = %v, want it to contain %q", c.json, err, c.want)
		}
	}
	// Every problem is reported at once.
	_, err := ParsePoint([]byte(`{"pipelining_depth": "deep", "tiling": "not-a-dict"}`))
	if err == nil || !strings.Contains(err.Error(), "pipelining_depth") || !strings.Contains(err.Error(), "tiling") {
		t.Errorf("two problems, error = %v", err)
	}
}

// Type-sane values that no launch supports parse, and CheckLaunch gives one
// clear reason for them (docs/spec/rules.md R24).
func TestCheckLaunch(t *testing.T) {
	tg := mustTarget(t, "rtx5090")
	cases := []struct{ json, want string }{
		{`{"threads_per_block": 7}`, "threads_per_block=7 out of range [32,1024]"},
		{`{"threads_per_block": 0}`, "threads_per_block=0 out of range [32,1024]"},
		{`{"threads_per_block": 200}`, "threads_per_block=200 is not a multiple of the warp size (32)"},
		{`{"threads_per_block": 512}`, "threads_per_block=512 is not supported by the persistent VM"},
		{`{"smem_bytes_per_block": 1000000000}`, "smem_bytes_per_block=1000000000 exceeds target 'rtx5090' dynamic shared memory cap 99328 (the opt-in cap 101376 less 2048"},
		// The whole opt-in cap leaves nothing for the kernels' static shared
		// memory: the launcher would refuse it at load (ir.DynamicSmemCap).
		{`{"smem_bytes_per_block": 101376}`, "exceeds target 'rtx5090' dynamic shared memory cap 99328"},
		{`{"smem_bytes_per_block": -4}`, "smem_bytes_per_block=-4 must be a non-negative int"},
		{`{"sm_assignment": {"99999": 9999}}`, "pins task 99999 to SM 9999, out of range [0,82)"},
	}
	for _, c := range cases {
		p, err := ParsePoint([]byte(c.json))
		if err != nil {
			t.Errorf("ParsePoint(%s): %v", c.json, err)
			continue
		}
		err = CheckLaunch(p, tg)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), ";") {
			t.Errorf("CheckLaunch(%s) = %v, want one reason containing %q", c.json, err, c.want)
		}
	}
	for _, tpb := range tpbChoices {
		p := Default()
		p.Config.ThreadsPerBlock = tpb
		p.Config.SmemBytesPerBlock = tg.DynamicSmemBytes()
		if err := CheckLaunch(p, tg); err != nil {
			t.Errorf("tpb %d at the SMEM cap: %v", tpb, err)
		}
	}
}

// An explicit map naming a task the program lacks is a clean lowering error.
func TestExplicitSMMapUnknownTask(t *testing.T) {
	p, err := ParsePoint([]byte(`{"sm_assignment": {"99999": 9999}}`))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Lower(mustPreset(t, "toy"), mustTarget(t, "h100"), p, LowerOptions{})
	if err == nil || !strings.Contains(err.Error(), "task 99999") {
		t.Errorf("Lower with a pin on task 99999: %v", err)
	}
}

func TestPointRoundTrip(t *testing.T) {
	src := `{"tiling": {"gemv": {"N_tile": 32}, "attention": {"kv_block": 64, "n_partitions": 4}},
		"fusion_grouping": [["gate", "up"]], "sm_assignment": {"3": 1, "1": 0}, "pipelining_depth": 3,
		"page_allocation": "linear", "threads_per_block": 128, "smem_bytes_per_block": 16384,
		"kernel_knobs": {"cpasync": 0, "kunroll": 2}}`
	p, err := ParsePoint([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	again, err := PointFromValue(p.Value())
	if err != nil {
		t.Fatal(err)
	}
	if p.ID() != again.ID() {
		t.Errorf("re-parsed id %s != %s", again.ID(), p.ID())
	}
	// Reserved knobs enter the id as the reference hashes them, but not the
	// id of the normalised point (docs/spec/rules.md R15), which is what campaigns hash.
	// A fusion group the lowering consumes enters both ids; one it does not
	// consume leaves the normalised id alone.
	q := p.Clone()
	q.Config.PageAllocation = "graph_color"
	q.Config.SetTile("attention", "kv_block", 128)
	if q.ID() == p.ID() {
		t.Errorf("reserved knobs did not change the reference id %s", p.ID())
	}
	if q.Normalize().ID() != p.Normalize().ID() {
		t.Errorf("reserved knobs changed the normalised id: %s vs %s", q.Normalize().ID(), p.Normalize().ID())
	}
	off, unconsumed := p.Clone(), p.Clone()
	off.Config.FusionGrouping = [][]string{}
	unconsumed.Config.FusionGrouping = [][]string{{"embed"}}
	if off.ID() == p.ID() || off.Normalize().ID() == p.Normalize().ID() || unconsumed.Normalize().ID() != off.Normalize().ID() {
		t.Errorf("fusion ids: gate_up %s, none %s, an unconsumed group %s (normalised)", p.Normalize().ID(), off.Normalize().ID(), unconsumed.Normalize().ID())
	}
	// Knobs at their defaults and absent knobs are the same point.
	r := p.Clone()
	r.Knobs["kunroll"] = 1
	s := p.Clone()
	delete(s.Knobs, "kunroll")
	if r.ID() != s.ID() {
		t.Errorf("kunroll=1 and no kunroll differ: %s vs %s", r.ID(), s.ID())
	}
	if p.Complexity() != 1+3+1+1 {
		t.Errorf("complexity = %d, want gate_up + depth 3 + smem + explicit map = 6", p.Complexity())
	}
	if Default().Complexity() != 2 {
		t.Errorf("default complexity = %d, want 2", Default().Complexity())
	}
}

func TestParsePointRefusesRepeatedKeys(t *testing.T) {
	for _, doc := range []string{
		`{"pipelining_depth": 1, "pipelining_depth": 4}`,
		`{"tiling": {"gemv": {"N_tile": 64, "N_tile": 512}}}`,
		`{"sm_assignment": {"1": 0, "1": 3}}`,
		`{"sm_assignment": {"0": 11, "5": 3, " 5": 3}}`, // one task under two spellings
	} {
		if _, err := ParsePoint([]byte(doc)); err == nil || !strings.Contains(err.Error(), "duplicate key") {
			t.Errorf("%s: got %v, want a duplicate-key error", doc, err)
		}
	}
}

func TestIgnoredKeys(t *testing.T) {
	v, err := pyjson.Parse([]byte(`{"tilling": {"gemv": {"N_tile": 512}}, "pipelining_depth": 3,
		"tiling": {"gemv": {"N_tile": 64, "Ntile": 9}, "attention": {"kv_block": 128}, "gemm": {"M_tile": 4}},
		"kernel_knobs": {"cpasync": 0}, "comment": "x"}`))
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(IgnoredKeys(v), " ")
	if want := "'tilling' 'comment' tiling['gemv']['Ntile'] tiling['gemm']"; got != want {
		t.Errorf("IgnoredKeys = %s, want %s", got, want)
	}
	for _, p := range []Point{Default(), DeviceDefault(), FullyFused()} {
		if d := p.Value(); len(IgnoredKeys(d)) != 0 {
			t.Errorf("%s has ignored keys: %v", d.Repr(), IgnoredKeys(d))
		}
	}
}

// The streaming ring's knobs parse from a schedule file, stay out of the
// default id, and are refused outside their range.
func TestParseRingKnobs(t *testing.T) {
	p, err := ParsePoint([]byte(`{"kernel_knobs": {"ring_stages": 12, "ring_tile": 2048}}`))
	if err != nil {
		t.Fatal(err)
	}
	if p.Knobs["ring_stages"] != 12 || RingBytesAheadPerSM(p) != 8*11*2048 {
		t.Errorf("ring knobs %v, %d bytes ahead", p.Knobs, RingBytesAheadPerSM(p))
	}
	if p.ID() == Default().ID() {
		t.Error("the ring does not change the id")
	}
	def, err := ParsePoint([]byte(`{"kernel_knobs": {"ring_stages": 0}}`))
	if err != nil || def.ID() != Default().ID() {
		t.Errorf("ring_stages 0 is not the default point: %v %s", err, def.ID())
	}
	if _, err := ParsePoint([]byte(`{"kernel_knobs": {"ring_stages": 64}}`)); err == nil {
		t.Error("ring_stages 64 accepted")
	}
}
