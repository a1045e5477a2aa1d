package validate

import (
	"slices"
)

// checkPages is step 8 (acyclic programs with a page allocation, at every
// size): two buffers bound to one physical page need separated live ranges,
// i.e. every use of one strictly happens-before every writer of the other
// ("A before B"; vacuous when B has no writer).
//
// Among the buffers of a page that have writers, "before" is transitive, so
// the page is safe iff those buffers, sorted by their first writer's
// topological index, form a chain of consecutive "before" pairs. Only when
// the chain breaks are all pairs examined, to report exactly the offending
// ones in binding order.
func (c *checker) checkPages() {
	p := c.p
	if p.Pages == nil {
		return
	}
	// Bindings as Python's dict holds them: one per buffer, first position, last page.
	at := map[int]int{}
	var bufs, pageOf []int
	reported := map[int]bool{}
	for _, bp := range p.Pages.BufferToPage {
		if c.buffer(bp.Buffer) == nil {
			if !reported[bp.Buffer] {
				reported[bp.Buffer] = true
				c.errf(CodePageBinding, -1, bp.Buffer, -1, "page %d is bound to missing buffer %d", bp.Page, bp.Buffer)
			}
			continue
		}
		if i, ok := at[bp.Buffer]; ok {
			pageOf[i] = bp.Page
			continue
		}
		at[bp.Buffer] = len(bufs)
		bufs = append(bufs, bp.Buffer)
		pageOf = append(pageOf, bp.Page)
	}
	if len(bufs) == 0 {
		return
	}
	var pageIDs []int
	occupants := map[int][]int{}
	for i, b := range bufs {
		pg := pageOf[i]
		if _, ok := occupants[pg]; !ok {
			pageIDs = append(pageIDs, pg)
		}
		occupants[pg] = append(occupants[pg], b)
	}
	uses := c.usesOf(bufs)
	r := c.reach
	before := func(a, b int) bool { return r.allPrecede(r.frontier(uses[a]), c.writers[b]) }

	// Phase 1: queue the consecutive pairs of every page's chain in one batch.
	type pageCase struct {
		occ          []int
		first, count int // batch queries of its chain
	}
	cases := make([]pageCase, 0, len(pageIDs))
	bt := r.newBatch()
	for _, pg := range pageIDs {
		occ := occupants[pg]
		pc := pageCase{occ: occ, first: len(bt.qs)}
		if len(occ) >= 2 {
			chain := c.pageChain(occ)
			for k := 0; k+1 < len(chain); k++ {
				for _, u := range r.frontier(uses[chain[k]]) {
					for _, w := range c.writers[chain[k+1]] {
						bt.add(u, w)
					}
				}
			}
		}
		pc.count = len(bt.qs) - pc.first
		cases = append(cases, pc)
	}
	bt.solve()

	// Phase 2: a broken chain is examined pair by pair, in binding order.
	for i, pg := range pageIDs {
		pc := cases[i]
		holds := true
		for q := pc.first; q < pc.first+pc.count; q++ {
			if !bt.ok(q) {
				holds = false
				break
			}
		}
		if holds {
			continue
		}
		occ := pc.occ
		for i := range occ {
			for j := i + 1; j < len(occ); j++ {
				a, b := occ[i], occ[j]
				if before(a, b) || before(b, a) {
					continue
				}
				c.errf(CodePageAlias, -1, a, -1, "page %d reused by buffers #%d ('%s') and #%d ('%s') whose live ranges are NOT ordered, clobber RACE (page reuse needs separated ranges)",
					pg, a, c.buffer(a).Name, b, c.buffer(b).Name)
			}
		}
	}
}

// pageChain returns the occupants of a page that have writers, sorted by
// their first writer's topological index (stable).
func (c *checker) pageChain(occ []int) []int {
	type entry struct {
		buf   int
		first int32
	}
	var chain []entry
	for _, b := range occ {
		ws := c.writers[b]
		if len(ws) == 0 {
			continue // no writer: ordered against everything, vacuously
		}
		first := c.topo[ws[0]]
		for _, w := range ws[1:] {
			first = min(first, c.topo[w])
		}
		chain = append(chain, entry{b, first})
	}
	slices.SortStableFunc(chain, func(x, y entry) int { return int(x.first) - int(y.first) })
	out := make([]int, len(chain))
	for k, e := range chain {
		out[k] = e.buf
	}
	return out
}

// usesOf returns, indexed by buffer id, the tasks that read or write each
// listed buffer (nil for the others).
func (c *checker) usesOf(bufs []int) [][]int32 {
	uses := make([][]int32, len(c.p.Buffers))
	want := make([]bool, len(c.p.Buffers))
	for _, b := range bufs {
		want[b] = true
	}
	for i := range c.p.Tasks {
		t := &c.p.Tasks[i]
		for _, list := range [][]int{t.Inputs, t.Outputs} {
			for _, b := range list {
				if b < 0 || b >= len(want) || !want[b] {
					continue
				}
				if u := uses[b]; len(u) == 0 || u[len(u)-1] != int32(i) {
					uses[b] = append(u, int32(i))
				}
			}
		}
	}
	return uses
}
