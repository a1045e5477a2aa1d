package validate

import (
	"slices"

	"github.com/amk-dev/amk/ir"
)

// rawRead is one read whose writers are not all direct predecessors of the
// reader; its answers sit in the batch at [first, first+len(others)).
type rawRead struct {
	at     int // index into the list of reads, in emission order
	task   int32
	buf    int
	others []int32
	first  int
}

// wawCase is a multi-writer buffer that the disjoint-tiles rule did not clear;
// its writer chain (in topological order) sits in the batch.
type wawCase struct {
	buf        int
	ws         []int32 // writers in task order
	oneCounter bool
	regs       []region
	chain      []int // batch indices: chain[k] answers byTopo[k] -> byTopo[k+1]
}

// checkRaces runs steps 4 and 5 at every program size: transitive RAW
// provenance (every writer of a transient buffer, other than the reader,
// precedes the read; KV caches included when written this pass; a reader
// of a part of a buffer, readSlice, needs only the writers whose
// footprints meet that part) and multi-writer WAW (pairwise disjoint
// tiles, or writers totally ordered). All reachability questions go to one
// batch.
func (c *checker) checkRaces() {
	p, r := c.p, c.reach
	b := r.newBatch()

	// Step 4, phase 1: settle the reads whose writers are direct predecessors.
	type read struct {
		task int32
		buf  int
		kind int8 // 0 fine, 1 never produced, 2 needs batch, 3 self read
	}
	var reads []read
	var hard []rawRead
	for _, tid := range c.order {
		t := &p.Tasks[tid]
		for slot, bid := range t.Inputs {
			buf := c.buffer(bid)
			if buf == nil || buf.Kind.ReadOnly() {
				continue
			}
			ws := c.writers[bid]
			if w, cols, ok := c.readSlice(t, slot); ok && len(ws) > 0 {
				// A partial reader needs only the writers of its part
				// (per-KV-head counters); coverage proves the part written.
				ws = c.touching(ws, buf, w, cols)
			}
			if buf.Kind == ir.KVCache && len(ws) == 0 {
				continue // prior-step state
			}
			if len(ws) == 0 {
				reads = append(reads, read{tid, bid, 1})
				continue
			}
			self, direct := false, true
			for _, w := range ws {
				if w == tid {
					self = true
				} else if r.quick(w, tid) != 1 {
					direct = false
				}
			}
			switch {
			case !direct:
				others := make([]int32, 0, len(ws))
				for _, w := range ws {
					if w != tid {
						others = append(others, w)
					}
				}
				hr := rawRead{at: len(reads), task: tid, buf: bid, others: others, first: len(b.qs)}
				for _, w := range others {
					b.add(w, tid)
				}
				hard = append(hard, hr)
				reads = append(reads, read{tid, bid, 2})
			case self && len(ws) == 1 && buf.Kind != ir.KVCache:
				reads = append(reads, read{tid, bid, 3})
			}
		}
	}

	// Step 5, phase 1: buffers with several writers, in the order the
	// reference meets them (first writer's task order, then output order).
	var waws []wawCase
	for _, bid := range c.writtenBufferOrder() {
		ws := c.writers[bid]
		buf := c.buffer(bid)
		if len(ws) < 2 || buf == nil || buf.Kind.ReadOnly() {
			continue
		}
		oc := p.Tasks[ws[0]].OutCounter
		one := true
		regs := c.regionScratch[:0] // kept only by the rare case below
		for _, w := range ws {
			if p.Tasks[w].OutCounter != oc {
				one = false
			}
			regs = append(regs, c.region(w))
		}
		c.regionScratch = regs
		if pairwiseDisjoint(regs) {
			continue // disjoint footprints cannot race, on one counter or several
		}
		wc := wawCase{buf: bid, ws: ws, oneCounter: one, regs: slices.Clone(regs)}
		byTopo := slices.Clone(ws)
		slices.SortFunc(byTopo, func(x, y int32) int { return int(c.topo[x]) - int(c.topo[y]) })
		for k := 0; k+1 < len(byTopo); k++ {
			wc.chain = append(wc.chain, b.add(byTopo[k], byTopo[k+1]))
		}
		waws = append(waws, wc)
	}

	b.solve()

	// Step 4, phase 2: report in topological order of the readers.
	h := 0
	for i, rd := range reads {
		t := &p.Tasks[rd.task]
		buf := c.buffer(rd.buf)
		switch rd.kind {
		case 1:
			c.errf(CodeNeverProduced, t.ID, rd.buf, -1, "task %d (%s) reads buffer #%d ('%s') that is never produced", t.ID, t.Label, rd.buf, buf.Name)
		case 3:
			c.selfRead(t, rd.buf, buf)
		case 2:
			for h < len(hard) && hard[h].at < i {
				h++
			}
			hr := hard[h]
			var missing []int32
			for k, w := range hr.others {
				if !b.ok(hr.first + k) {
					missing = append(missing, w)
				}
			}
			switch {
			case len(missing) > 0:
				code, word := CodeRaceRAW, "buffer"
				if buf.Kind == ir.KVCache {
					code, word = CodeRaceKV, "KV cache"
				}
				c.errf(code, t.ID, rd.buf, -1, "task %d (%s) reads %s #%d ('%s') but writer task(s) %s are NOT ordered before it, data RACE", t.ID, t.Label, word, rd.buf, buf.Name, pyInts(missing))
			case len(hr.others) == 0 && buf.Kind != ir.KVCache:
				c.selfRead(t, rd.buf, buf)
			}
		}
	}

	// Step 5, phase 2.
	for _, wc := range waws {
		ordered := true
		for _, qi := range wc.chain {
			if !b.ok(qi) {
				ordered = false
				break
			}
		}
		if !ordered {
			c.reportWAW(wc)
		}
	}
}

// reportWAW names the first writer pair (in writer order) that overlaps and
// is unordered, as the reference does, falling back to the first two writers.
func (c *checker) reportWAW(wc wawCase) {
	p, ws := c.p, wc.ws
	ci, cj := ws[0], ws[1]
	const chunk = 64 * maxSweepWords
search:
	for start := 0; start < len(ws); start += chunk {
		srcs := ws[start:min(len(ws), start+chunk)]
		cp := c.reach.compare(srcs, ws)
		for k := range srcs {
			i := start + k
			for j := i + 1; j < len(ws); j++ {
				if wc.regs[i].disjoint(wc.regs[j]) || cp.precedes(k, ws[i], ws[j]) || cp.precededBy(k, ws[i], ws[j]) {
					continue
				}
				ci, cj = ws[i], ws[j]
				break search
			}
		}
	}
	reason := "share no counter; "
	if wc.oneCounter {
		reason = "share a counter but their tiles OVERLAP; "
	}
	buf := c.buffer(wc.buf)
	c.errf(CodeRaceWAW, int(ci), wc.buf, -1, "multi-writer WAW race on buffer #%d ('%s'): writers %d ('%s') and %d ('%s') %sneither is ordered happens-before the other, write-after-write RACE",
		wc.buf, buf.Name, ci, p.Tasks[ci].Label, cj, p.Tasks[cj].Label, reason)
}

// writtenBufferOrder lists the written buffers in the order the reference's
// writers_by_buffer dict holds them: by first writing task, then output slot.
func (c *checker) writtenBufferOrder() []int {
	seen := make([]bool, len(c.p.Buffers))
	var out []int
	for i := range c.p.Tasks {
		for _, b := range c.p.Tasks[i].Outputs {
			if b >= 0 && b < len(seen) && !seen[b] {
				seen[b] = true
				out = append(out, b)
			}
		}
	}
	return out
}

// selfRead reports a task that reads a transient buffer only it writes. The
// reference only warns; docs/spec/ir.md §3 (seed 000's provenance rule: every
// read of an activation or output has a writer before it) makes it a race,
// and amk rejects it (docs/spec/rules.md R31): the read sees whatever the
// memory held (zeros in the VM, the last step's or a page-mate's data on a
// device), so the VM's check says nothing about the device's result.
func (c *checker) selfRead(t *ir.Task, b int, buf *ir.Buffer) {
	c.errf(CodeSelfRead, t.ID, b, -1, "task %d (%s) reads buffer #%d ('%s') in place with no external producer (reads its own uninitialized output?): no write precedes the read, data RACE", t.ID, t.Label, b, buf.Name)
}
