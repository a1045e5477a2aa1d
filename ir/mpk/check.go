package mpk

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/amk-dev/amk/ir"
)

// CheckOptions describe the runtime a graph is checked for: what MPK reads
// from its launch configuration rather than from task_graph.json.
type CheckOptions struct {
	Workers  int // worker thread blocks (num_workers); 0 means DefaultWorkers
	QueueLen int // entries of each worker queue; 0 means DefaultQueueLen
	GPUs     int // GPUs in the launch; 0 means 1
}

// Defaults of CheckOptions. The queue length is 1024, the stricter of the
// format's two published bounds; Mirage's current runtime sets 8192
// (docs/spec/formats.md §1).
const (
	DefaultWorkers  = 128
	DefaultQueueLen = 1024
	maxFindings     = 8 // per code; the rest are counted
)

// Finding codes.
const (
	CodeEventID      = "event-id"      // an event id that names no event
	CodeGPU          = "gpu-id"        // an event of a gpu the launch does not have
	CodeEventType    = "event-type"    // an event_type neither numbering defines, or mixed numberings
	CodeTaskRange    = "task-range"    // a range or first task outside all_tasks
	CodeDeadlock     = "deadlock"      // an event that never collects its num_triggers
	CodeExtraTrigger = "extra-trigger" // more triggering tasks than num_triggers
	CodeCycle        = "cycle"         // tasks that wait on each other
	CodeOverlap      = "overlap"       // unordered tasks writing overlapping bytes
	CodeRace         = "race"          // a read of bytes an unordered task writes
	CodeQueue        = "queue-overflow"
	CodeIteration    = "iteration" // inconsistent iteration semantics
	CodeLaunch       = "launch"    // a task launched twice, or never
)

// Finding is one problem, named in MPK's ids (task positions, event indices).
type Finding struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Report is the outcome of Check.
type Report struct {
	Format   string    `json:"format"` // always "mpk-task-graph"
	OK       bool      `json:"ok"`
	Errors   []Finding `json:"errors"`
	Warnings []Finding `json:"warnings"`
	Tasks    int       `json:"tasks"`
	Events   int       `json:"events"`
	Workers  int       `json:"workers"`
	QueueLen int       `json:"queue_len"`
}

// ReportFormat is Report.Format.
const ReportFormat = "mpk-task-graph"

// String is the human report: a headline, then one line per finding.
func (r Report) String() string {
	var b strings.Builder
	verdict := "VALID"
	if !r.OK {
		verdict = "REJECTED"
	}
	fmt.Fprintf(&b, "MPK task graph: %s (%d tasks, %d events; %d workers, %d-entry queues)", verdict, r.Tasks, r.Events, r.Workers, r.QueueLen)
	for _, f := range r.Errors {
		fmt.Fprintf(&b, "\n  error[%s]: %s", f.Code, f.Message)
	}
	for _, f := range r.Warnings {
		fmt.Fprintf(&b, "\n  warning[%s]: %s", f.Code, f.Message)
	}
	return b.String()
}

type checker struct {
	g        *Graph
	opt      CheckOptions
	rep      Report
	counts   map[string]int // findings per code (warnings under warningKey+code)
	triggers [][]int        // per event: the tasks that signal it
	waiters  [][]int        // per event: the tasks whose dependent_event it is
	prog     *ir.Program
	progDone bool
}

func (c *checker) add(warning bool, code, format string, args ...any) {
	key := code
	if warning {
		key = warningKey + code
	}
	c.counts[key]++
	if c.counts[key] > maxFindings {
		return
	}
	f := Finding{Code: code, Message: fmt.Sprintf(format, args...)}
	if warning {
		c.rep.Warnings = append(c.rep.Warnings, f)
	} else {
		c.rep.Errors = append(c.rep.Errors, f)
	}
}

// warningKey prefixes a warning's code in checker.counts, which otherwise
// counts errors.
const warningKey = "warning:"

func (c *checker) errf(code, format string, args ...any)  { c.add(false, code, format, args...) }
func (c *checker) warnf(code, format string, args ...any) { c.add(true, code, format, args...) }

// Check proves an MPK task graph safe to launch, in MPK's own terms: every
// event can collect its num_triggers, no dependency cycle, no unordered
// overlapping writes or reads of unordered writes, every range inside
// all_tasks, no worker queue overflow, one iteration step per pass, every
// event on a gpu of the launch. It never panics.
func Check(g *Graph, opt CheckOptions) Report {
	if opt.Workers <= 0 {
		opt.Workers = DefaultWorkers
	}
	if opt.QueueLen <= 0 {
		opt.QueueLen = DefaultQueueLen
	}
	if opt.GPUs <= 0 {
		opt.GPUs = 1
	}
	c := &checker{g: g, opt: opt, counts: map[string]int{},
		rep: Report{Format: ReportFormat, Errors: []Finding{}, Warnings: []Finding{}, Tasks: len(g.Tasks), Events: len(g.Events), Workers: opt.Workers, QueueLen: opt.QueueLen}}
	if c.structure() {
		c.triggerCounts()
		cyclic := c.cycles()
		c.simulate()
		if !cyclic && c.counts[CodeDeadlock] == 0 {
			c.races() // a race needs both tasks to run
		}
	}
	keys := make([]string, 0, len(c.counts))
	for key := range c.counts {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	for _, key := range keys {
		if n := c.counts[key]; n > maxFindings {
			code, warning := strings.CutPrefix(key, warningKey)
			f := Finding{Code: code, Message: fmt.Sprintf("... and %d more %s findings", n-maxFindings, code)}
			if warning {
				c.rep.Warnings = append(c.rep.Warnings, f)
			} else {
				c.rep.Errors = append(c.rep.Errors, f)
			}
		}
	}
	sort.SliceStable(c.rep.Errors, func(i, j int) bool { return c.rep.Errors[i].Code < c.rep.Errors[j].Code })
	c.rep.OK = len(c.rep.Errors) == 0
	return c.rep
}

func (c *checker) eventName(e int) string {
	return "e" + strconv.Itoa(e) + " (" + c.g.Events[e].Kind().String() + ")"
}

func (c *checker) taskName(t int) string {
	return "task " + strconv.Itoa(t) + " (" + TaskTypeName(c.g.Tasks[t].TaskType) + ")"
}

// structure checks ids, gpus, event types and ranges; the deeper checks run
// only on a graph that passes it.
func (c *checker) structure() bool {
	g := c.g
	numbering := -1
	for e, ev := range g.Events {
		k, n, ok := kindOf(ev.EventType)
		switch {
		case !ok:
			c.errf(CodeEventType, "all_events[%d].event_type %d is no MPK event type", e, ev.EventType)
		case numbering >= 0 && int(n) != numbering:
			c.errf(CodeEventType, "all_events[%d].event_type %d mixes the older numbering (0-5, docs/spec/formats.md §1) with Mirage's (900-911)", e, ev.EventType)
		default:
			numbering = int(n)
		}
		if ok && n == NumberingSeed && e == 0 {
			c.warnf(CodeEventType, "event_type codes follow the older numbering (0-5, docs/spec/formats.md §1); Mirage's runtime reads 900-911")
		}
		if ev.NumTriggers < 0 {
			c.errf(CodeDeadlock, "all_events[%d].num_triggers is %d", e, ev.NumTriggers)
		}
		inside := ev.FirstTaskID <= ev.LastTaskID && ev.LastTaskID <= int64(len(g.Tasks))
		switch {
		case !inside && k.Launches():
			c.errf(CodeTaskRange, "event e%d (%s) launches tasks [%d, %d), outside all_tasks [0, %d)", e, k, ev.FirstTaskID, ev.LastTaskID, len(g.Tasks))
		case !inside:
			c.warnf(CodeTaskRange, "event e%d (%s) names tasks [%d, %d), outside all_tasks [0, %d) (its type launches nothing)", e, k, ev.FirstTaskID, ev.LastTaskID, len(g.Tasks))
		}
	}
	for i, f := range g.FirstTasks {
		if f >= int64(len(g.Tasks)) {
			c.errf(CodeTaskRange, "first_tasks[%d] is task %d, outside all_tasks [0, %d)", i, f, len(g.Tasks))
		}
	}
	// A worker waits only on events of its own gpu, and signals a non-NVSHMEM
	// event only on its own gpu: those ids name the gpu the file is for.
	own, ownTask := -1, -1
	for t := range g.Tasks {
		for _, ref := range []struct {
			id    EventID
			name  string
			local bool
		}{{g.Tasks[t].TriggerEvent, "trigger_event", !g.Tasks[t].TriggerEvent.NVSHMEM()}, {g.Tasks[t].DependentEvent, "dependent_event", true}} {
			switch id := ref.id; {
			case !id.Valid():
			case !id.Canonical() || id.Index() >= len(g.Events):
				c.errf(CodeEventID, "task %d %s %d (%s) names no event of all_events (%d events)", t, ref.name, uint64(id), id, len(g.Events))
			case id.GPU() >= c.opt.GPUs:
				c.errf(CodeGPU, "task %d %s %s is an event of gpu %d; the launch has %d gpu(s)", t, ref.name, id, id.GPU(), c.opt.GPUs)
			case ref.local && own >= 0 && id.GPU() != own:
				c.errf(CodeGPU, "task %d %s %s is on gpu %d, but task %d's local events are on gpu %d; a worker waits on and signals only its own gpu's events (NVSHMEM ones aside)",
					t, ref.name, id, id.GPU(), ownTask, own)
			case ref.local:
				own, ownTask = id.GPU(), t
			}
		}
	}
	return len(c.rep.Errors) == 0
}

func (c *checker) triggerCounts() {
	g := c.g
	c.triggers = make([][]int, len(g.Events))
	c.waiters = make([][]int, len(g.Events))
	for t := range g.Tasks {
		if e := g.Tasks[t].TriggerEvent; e.Valid() {
			c.triggers[e.Index()] = append(c.triggers[e.Index()], t)
		}
		if e := g.Tasks[t].DependentEvent; e.Valid() {
			c.waiters[e.Index()] = append(c.waiters[e.Index()], t)
		}
	}
	for e, ev := range g.Events {
		k := ev.Kind()
		used := len(c.waiters[e]) > 0 || k.Launches() || k == KindEndOfTaskGraph
		if used && len(c.triggers[e]) > ev.NumTriggers {
			c.errf(CodeExtraTrigger, "event %s needs %d trigger(s) but %d tasks trigger it (%s): it fires before all of them finish, and its count runs ahead in later iterations",
				c.eventName(e), ev.NumTriggers, len(c.triggers[e]), list(c.triggers[e]))
		}
		if len(c.waiters[e]) > 0 && ev.NumTriggers == 0 {
			c.errf(CodeDeadlock, "event %s has num_triggers 0: it never fires, so tasks %s wait forever", c.eventName(e), list(c.waiters[e]))
		}
	}
}

// list writes task or event numbers, eliding the middle of a long list.
func list(xs []int) string {
	const keep = 6
	var parts []string
	for i, x := range xs {
		if len(xs) > 2*keep && i == keep {
			parts = append(parts, "... "+strconv.Itoa(len(xs)-2*keep)+" more ...")
		}
		if len(xs) > 2*keep && i >= keep && i < len(xs)-keep {
			continue
		}
		parts = append(parts, strconv.Itoa(x))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// program is the task-for-task translation (ToProgram without the sidecar)
// whose dependency graph the cycle and race checks walk: task i there is
// MPK task i.
func (c *checker) program() *ir.Program {
	if c.progDone {
		return c.prog
	}
	c.progDone = true
	side := c.g.AMK
	c.g.AMK = nil
	p, err := ToProgram(c.g)
	c.g.AMK = side
	if err != nil {
		c.errf(CodeEventID, "%v", err)
		return nil
	}
	c.prog = p
	return p
}

func (c *checker) cycles() bool {
	p := c.program()
	if p == nil {
		return true
	}
	cyc := ir.BuildGraph(p).FindCycle()
	if cyc == nil {
		return false
	}
	var steps []string
	for i, t := range cyc {
		next := cyc[(i+1)%len(cyc)]
		steps = append(steps, fmt.Sprintf("task %d waits on e%d", next, c.edgeEvent(int(t), int(next))))
	}
	ids := make([]int, len(cyc))
	for i, t := range cyc {
		ids[i] = int(t)
	}
	c.errf(CodeCycle, "tasks %s wait on each other (%s): none of them can start", list(ids), strings.Join(steps, ", "))
	return true
}

// edgeEvent is the event through which task a orders task b.
func (c *checker) edgeEvent(a, b int) int {
	if e := c.g.Tasks[b].DependentEvent; e.Valid() && c.g.Tasks[a].TriggerEvent == e {
		return e.Index()
	}
	return c.g.Tasks[a].TriggerEvent.Index()
}
