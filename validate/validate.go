package validate

import (
	"fmt"
	"strconv"

	"github.com/amk-dev/amk/ir"
)

// Validate statically proves a program safe to load, or says why not. It
// never panics and never mutates p. The rules run in the order documented in
// doc.go; errors accumulate across them.
func Validate(p *ir.Program) (rep Report) {
	if p == nil {
		rep.Errors = []Diagnostic{{Code: CodeNilProgram, Task: -1, Buffer: -1, Counter: -1, Message: "no program (nil)"}}
		return rep
	}
	c := newChecker(p)
	defer func() {
		// Last-resort guard of the never-panics contract: a bug in a rule
		// becomes a rejection, not a crash. The fuzz target asserts it never fires.
		if x := recover(); x != nil {
			c.err(CodeInternal, -1, -1, -1, fmt.Sprintf("internal validator error: %v", x))
			rep = c.finish()
		}
	}()
	c.run()
	return c.finish()
}

// checker holds one validation run: the program, the derived views the rules
// share, and the diagnostics gathered so far.
type checker struct {
	p        *ir.Program
	errors   []Diagnostic
	warnings []Diagnostic

	dense   bool
	g       *ir.Graph
	order   []int32 // Kahn order, nil on a cycle
	topo    []int32 // task position -> index in order (valid when order != nil)
	writers [][]int32
	reach   *reacher

	regions  []region // per task, filled by region()
	regionOK []bool
	in, out  []*ir.Buffer // scratch of resolve

	// Scratch reused from buffer to buffer by checkRaces and coverBuffer,
	// so that a large program's proofs leave no per-buffer garbage.
	regionScratch []region
	tileScratch   []tile
}

func newChecker(p *ir.Program) *checker { return &checker{p: p} }

func (c *checker) run() {
	c.dense = c.checkDenseIDs()
	c.g = ir.BuildGraph(c.p)
	c.order = c.g.TopologicalOrder()
	if !c.dense {
		// Every reference in a program is an id that must equal a list
		// position; with ids that do not, no further proof is meaningful.
		c.checkGPULabel()
		return
	}
	c.writers = ir.WritersByBuffer(c.p)
	c.checkTasks()      // step 1
	c.checkWaits()      // step 2
	c.checkAcyclic()    // step 3
	if c.order != nil { // steps 4 and 5 (no task-count cap)
		c.topo = make([]int32, len(c.order))
		for i, t := range c.order {
			c.topo[t] = int32(i)
		}
		c.reach = newReacher(c.p, c.g, c.order, c.topo)
		c.checkRaces()
	}
	c.checkOnChip()   // step 6
	c.checkSMQueues() // step 7
	if c.order != nil && len(c.p.Tasks) > 0 {
		c.checkPages() // step 8
	}
	c.checkOutputs()  // step 9
	c.checkGPULabel() // step 9
	c.checkBounds()   // docs/spec/rules.md R19: per-task bounds, shapes and dtypes
	if c.order != nil {
		c.checkCoverage() // docs/spec/rules.md R19: tiles cover every column exactly once
	}
	c.checkMemoryModel() // docs/spec/rules.md R31: read-only kinds, counters from 0
}

func (c *checker) finish() Report {
	return Report{OK: len(c.errors) == 0, Errors: c.errors, Warnings: c.warnings, Stats: c.stats()}
}

func (c *checker) err(code string, task, buf, ctr int, msg string) {
	c.errors = append(c.errors, Diagnostic{Code: code, Task: task, Buffer: buf, Counter: ctr, Message: msg})
}

func (c *checker) warn(code string, task, buf, ctr int, msg string) {
	c.warnings = append(c.warnings, Diagnostic{Code: code, Task: task, Buffer: buf, Counter: ctr, Message: msg})
}

func (c *checker) errf(code string, task, buf, ctr int, format string, args ...any) {
	c.err(code, task, buf, ctr, fmt.Sprintf(format, args...))
}

func (c *checker) warnf(code string, task, buf, ctr int, format string, args ...any) {
	c.warn(code, task, buf, ctr, fmt.Sprintf(format, args...))
}

// buffer returns the buffer with id b, or nil when b names no buffer (ids are
// dense whenever this is called).
func (c *checker) buffer(b int) *ir.Buffer { return c.p.Buffer(b) }

func (c *checker) stats() Stats {
	p := c.p
	s := Stats{Tasks: len(p.Tasks), Buffers: len(p.Buffers), Counters: len(p.Counters)}
	if c.g != nil {
		s.Edges = c.g.NumEdges()
		s.Acyclic = c.order != nil
	}
	s.WeightMB = weightMB(p)
	for i := range p.Tasks {
		if p.Tasks[i].SM != nil {
			s.SMAssigned = true
			break
		}
	}
	return s
}

// weightMB is round(total_weight_bytes / 1e6, 2) with Python's rounding (the
// correctly rounded decimal, ties to even).
func weightMB(p *ir.Program) float64 {
	var total float64
	for i := range p.Buffers {
		b := &p.Buffers[i]
		if b.Kind == ir.Weight {
			total += float64(nbytes(b))
		}
	}
	v, err := strconv.ParseFloat(strconv.FormatFloat(total/1e6, 'f', 2, 64), 64)
	if err != nil {
		return 0
	}
	return v
}
