package ir

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

// dag builds tasks from wait lists: task i has its own counter i and waits
// (threshold 1) on the counters listed.
func dag(waitsOn ...[]int) *Program {
	p := NewProgram()
	for range waitsOn {
		p.AddCounter("")
	}
	for i, ws := range waitsOn {
		t := Task{Op: OpNOP, OutCounter: i, Label: "t" + string(rune('a'+i%26))}
		for _, c := range ws {
			t.Waits = append(t.Waits, Wait{Counter: c, Threshold: 1})
		}
		p.AddTask(t)
	}
	return p
}

func edges(g *Graph) [][2]int32 {
	var out [][2]int32
	for a := 0; a < g.N; a++ {
		for _, b := range g.Succ(a) {
			out = append(out, [2]int32{int32(a), b})
		}
	}
	return out
}

func TestDependencyEdges(t *testing.T) {
	// Tasks 0 and 1 share counter 0 (two producers); 2 waits on it twice and
	// on 3's counter; 3 waits on its own counter (a self-edge, kept).
	p := NewProgram()
	for range 4 {
		p.AddCounter("")
	}
	p.AddTask(Task{Op: OpNOP, OutCounter: 0})
	p.AddTask(Task{Op: OpNOP, OutCounter: 0})
	p.AddTask(Task{Op: OpNOP, OutCounter: 2, Waits: []Wait{{3, 1}, {0, 2}, {0, 2}}})
	p.AddTask(Task{Op: OpNOP, OutCounter: 3, Waits: []Wait{{3, 1}, {9, 1}}}) // counter 9 does not exist
	g := BuildGraph(p)
	want := [][2]int32{{0, 2}, {1, 2}, {3, 2}, {3, 3}}
	if got := edges(g); !reflect.DeepEqual(got, want) {
		t.Fatalf("edges %v, want %v", got, want)
	}
	if g.NumEdges() != 4 || !reflect.DeepEqual(g.Pred(2), []int32{0, 1, 3}) {
		t.Fatalf("NumEdges %d, Pred(2) %v", g.NumEdges(), g.Pred(2))
	}
	if got := ProducersByCounter(p); !reflect.DeepEqual(got, [][]int32{{0, 1}, nil, {2}, {3}}) {
		t.Fatalf("producers %v", got)
	}
	if g.TopologicalOrder() != nil {
		t.Fatal("self-edge must make the graph cyclic")
	}
}

func TestWritersByBuffer(t *testing.T) {
	p := NewProgram()
	p.AddBuffer(Buffer{Name: "a"})
	p.AddBuffer(Buffer{Name: "b"})
	p.AddTask(Task{Op: OpCOPY, Outputs: []int{1, 1, 7, -1}})
	p.AddTask(Task{Op: OpCOPY, Outputs: []int{1, 0}})
	if got := WritersByBuffer(p); !reflect.DeepEqual(got, [][]int32{{1}, {0, 1}}) {
		t.Fatalf("writers %v", got)
	}
}

// TestKahnOrder: the initial ready set in position order, then FIFO — the
// reference's deque order, not lowest-id-first.
func TestKahnOrder(t *testing.T) {
	// 0 and 3 are sources; 1 <- 0; 2 <- 3; 4 <- 1, 2; 5 <- 0.
	p := dag(nil, []int{0}, []int{3}, nil, []int{1, 2}, []int{0})
	got := BuildGraph(p).TopologicalOrder()
	if want := []int32{0, 3, 1, 5, 2, 4}; !reflect.DeepEqual(got, want) {
		t.Fatalf("order %v, want %v", got, want)
	}
}

// TestFindCycle5000 is the reference's 5000-node cycle: found iteratively,
// as a witness that follows the edges.
func TestFindCycle5000(t *testing.T) {
	const n = 5000
	ws := make([][]int, n)
	for i := range ws {
		ws[i] = []int{(i + n - 1) % n}
	}
	g := BuildGraph(dag(ws...))
	if g.TopologicalOrder() != nil {
		t.Fatal("cycle not detected")
	}
	cyc := g.FindCycle()
	if len(cyc) != n {
		t.Fatalf("witness has %d nodes, want %d", len(cyc), n)
	}
	for i, x := range cyc {
		next := cyc[(i+1)%len(cyc)]
		if !slices.Contains(g.Succ(int(x)), next) {
			t.Fatalf("witness step %d -> %d is not an edge", x, next)
		}
	}
	if cyc[0] != 0 || cyc[1] != 1 {
		t.Fatalf("witness starts %v", cyc[:2])
	}
	if BuildGraph(dag(nil, []int{0})).FindCycle() != nil {
		t.Fatal("acyclic graph reported a cycle")
	}
}

func TestSimulateCounters(t *testing.T) {
	p := dag(nil, []int{0}, []int{1})
	order, stuck := SimulateCounters(p)
	if !reflect.DeepEqual(order, []int{0, 1, 2}) || len(stuck) != 0 {
		t.Fatalf("order %v stuck %v", order, stuck)
	}
	// Threshold 5 on a one-producer counter can never hold; its dependant is stuck too.
	p.Tasks[1].Waits[0].Threshold = 5
	order, stuck = SimulateCounters(p)
	if !reflect.DeepEqual(order, []int{0}) || !reflect.DeepEqual(stuck, []int{1, 2}) {
		t.Fatalf("order %v stuck %v", order, stuck)
	}
	// A shared counter with two producers releases its all-join consumer.
	p = dag(nil, nil, []int{0})
	p.Tasks[1].OutCounter = 0
	p.Tasks[2].Waits[0].Threshold = 2
	if order, stuck := SimulateCounters(p); len(order) != 3 || len(stuck) != 0 {
		t.Fatalf("all-join: order %v stuck %v", order, stuck)
	}
	// A cycle leaves both tasks stuck.
	if _, stuck := SimulateCounters(dag([]int{1}, []int{0})); !reflect.DeepEqual(stuck, []int{0, 1}) {
		t.Fatalf("cycle: stuck %v", stuck)
	}
}

// TestSimulateAdversarial is the dynamic backstop: a read that waits on the
// wrong counter is caught in some interleaving; a correct program has none.
func TestSimulateAdversarial(t *testing.T) {
	build := func(waitOnWriter bool) *Program {
		p := NewProgram()
		x := p.AddBuffer(Buffer{Name: "x", Kind: IOInput, Shape: []int{1, 8}})
		a := p.AddBuffer(Buffer{Name: "actA", Kind: Activation, Shape: []int{1, 8}})
		b := p.AddBuffer(Buffer{Name: "actB", Kind: Activation, Shape: []int{1, 8}})
		o := p.AddBuffer(Buffer{Name: "o", Kind: IOOutput, Shape: []int{1, 8}})
		c0, c1, c2 := p.AddCounter(""), p.AddCounter(""), p.AddCounter("")
		p.AddTask(Task{Op: OpCOPY, Inputs: []int{x}, Outputs: []int{a}, OutCounter: c0, Label: "t0"})
		p.AddTask(Task{Op: OpCOPY, Inputs: []int{x}, Outputs: []int{b}, OutCounter: c1})
		w := []Wait{{c1, 1}}
		if waitOnWriter {
			w = append(w, Wait{c0, 1})
		}
		p.AddTask(Task{Op: OpADD, Inputs: []int{a, b}, Outputs: []int{o}, OutCounter: c2, Waits: w})
		return p
	}
	got := SimulateAdversarial(build(false), 16)
	want := []string{"[seed 1] task 2 (ADD) reads buffer #1 ('actA') before any producer wrote it"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("violations %q, want %q", got, want)
	}
	if got := SimulateAdversarial(build(true), 16); len(got) != 0 {
		t.Fatalf("correct program flagged: %v", got)
	}
	// A KV cache nobody writes this pass is prior-step state.
	p := build(true)
	kv := p.AddBuffer(Buffer{Name: "kv", Kind: KVCache, Shape: []int{4, 8}})
	p.Tasks[2].Inputs = append(p.Tasks[2].Inputs, kv)
	if got := SimulateAdversarial(p, 4); len(got) != 0 {
		t.Fatalf("prior KV state flagged: %v", got)
	}
	for _, v := range SimulateAdversarial(build(false), 16) {
		if !strings.HasPrefix(v, "[seed ") {
			t.Fatalf("format %q", v)
		}
	}
}
