package validate

import (
	"math/rand"
	"testing"

	"github.com/amk-dev/amk/ir"
)

// randomDAG builds n tasks; task i waits on up to three counters of earlier
// tasks, and some tasks share a counter with their predecessor.
func randomDAG(rng *rand.Rand, n int) *ir.Program {
	p := ir.NewProgram()
	for i := range n {
		oc := -1
		if i > 0 && rng.Intn(5) == 0 {
			oc = p.Tasks[i-1].OutCounter
		} else {
			oc = p.AddCounter("")
		}
		var ws []ir.Wait
		for k := rng.Intn(4); k > 0 && i > 0; k-- {
			// mostly near neighbours, sometimes far back
			j := i - 1 - rng.Intn(min(i, 8))
			if rng.Intn(6) == 0 {
				j = rng.Intn(i)
			}
			if c := p.Tasks[j].OutCounter; c != oc {
				ws = append(ws, ir.Wait{Counter: c, Threshold: 1})
			}
		}
		p.AddTask(ir.Task{Op: ir.OpNOP, OutCounter: oc, Waits: ws})
	}
	return p
}

// ancestors is the brute-force oracle: anc[v][u] iff u strictly precedes v.
func ancestors(g *ir.Graph, order []int32) [][]bool {
	anc := make([][]bool, g.N)
	for _, v := range order {
		anc[v] = make([]bool, g.N)
		for _, p := range g.Pred(int(v)) {
			anc[v][p] = true
			for u, ok := range anc[p] {
				if ok {
					anc[v][u] = true
				}
			}
		}
	}
	return anc
}

func TestReachabilityIsExact(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for range 6 {
		n := 50 + rng.Intn(1400)
		p := randomDAG(rng, n)
		g := ir.BuildGraph(p)
		order := g.TopologicalOrder()
		if order == nil {
			t.Fatal("random DAG has a cycle")
		}
		topo := make([]int32, n)
		for i, x := range order {
			topo[x] = int32(i)
		}
		anc := ancestors(g, order)
		r := newReacher(p, g, order, topo)
		pick := func() int32 { return int32(rng.Intn(n)) }

		b := r.newBatch()
		type pair struct{ u, v int32 }
		var pairs []pair
		for range 3000 {
			u, v := pick(), pick()
			pairs = append(pairs, pair{u, v})
			b.add(u, v)
		}
		b.solve()
		for k, pr := range pairs {
			if b.ok(k) != anc[pr.v][pr.u] {
				t.Fatalf("n=%d: precede(%d, %d) = %v, want %v", n, pr.u, pr.v, b.ok(k), anc[pr.v][pr.u])
			}
		}

		for range 300 {
			us := make([]int32, 1+rng.Intn(6))
			vs := make([]int32, 1+rng.Intn(6))
			base := rng.Intn(n)
			for i := range us {
				us[i] = int32((base + rng.Intn(30)) % n)
			}
			for i := range vs {
				vs[i] = int32((base + 10 + rng.Intn(60)) % n)
			}
			want := true
			for _, u := range us {
				for _, v := range vs {
					want = want && anc[v][u]
				}
			}
			if got := r.allPrecede(us, vs); got != want {
				t.Fatalf("allPrecede(%v, %v) = %v, want %v", us, vs, got, want)
			}
			if got := r.allPrecede(r.frontier(us), vs); got != want {
				t.Fatalf("allPrecede(frontier(%v)=%v, %v) = %v, want %v", us, r.frontier(us), vs, got, want)
			}
		}

		srcs := distinctByTopo(r, []int32{pick(), pick(), pick(), pick(), pick()})
		others := []int32{pick(), pick(), pick(), pick(), pick(), pick(), pick()}
		cp := r.compare(srcs, append(append([]int32{}, others...), srcs...))
		for k, s := range srcs {
			for _, o := range append(others, srcs...) {
				if got := cp.precedes(k, s, o); got != anc[o][s] {
					t.Fatalf("compare: %d precedes %d = %v", s, o, got)
				}
				if got := cp.precededBy(k, s, o); got != anc[s][o] {
					t.Fatalf("compare: %d precedes %d = %v", o, s, got)
				}
			}
		}
		for _, s := range r.slot {
			if s != -1 {
				t.Fatal("sweep slots not cleared")
			}
		}
	}
}
