package campaign

import (
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/amk-dev/amk/flywheel"
	"github.com/amk-dev/amk/ir"
	"github.com/amk-dev/amk/schedule"
	"github.com/amk-dev/amk/trial"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of testdata scripts")

// epoch is time zero of every script.
var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// toyShape is the model shape scripts run on; nearShape is a neighbour.
var (
	toyShape  = flywheel.Shape{Hidden: 256, NLayers: 1, NHeads: 4, NKVHeads: 2, HeadDim: 64, Intermediate: 512, Vocab: 1024}
	nearShape = flywheel.Shape{Hidden: 256, NLayers: 2, NHeads: 4, NKVHeads: 2, HeadDim: 64, Intermediate: 512, Vocab: 1024}
)

// fakeLatency is the scripts' deterministic stand-in for an evaluator: a
// landscape with its optimum (100 us) at N_tile 32, depth 3, 256 threads,
// load_balance, no split-KV. The canonical default scores 112.2 us.
func fakeLatency(p schedule.Point) float64 {
	nt, ok := p.Config.Tile("gemv", "N_tile")
	if !ok {
		nt = 32
	}
	lat := 100 * (1 + 0.1*math.Abs(math.Log2(float64(nt))-5)) * (1 + 0.02*math.Abs(float64(p.Config.PipeliningDepth)-3))
	if p.Config.ThreadsPerBlock == 128 {
		lat *= 1.03
	}
	if p.Config.SMAssignment.Policy == schedule.PolicyRoundRobin {
		lat *= 1.01
	}
	if np, ok := p.Config.Tile("attention", "n_partitions"); ok {
		lat *= 1 + 0.01*float64(np-1)
	}
	if v := p.Knobs["cols_per_warp"]; v > 1 {
		lat *= 1 - 0.01*float64(v)
	}
	return math.Round(lat*1e4) / 1e4
}

// fakeCorpus builds n corpus records of random points with fake latencies.
func fakeCorpus(n int, shape flywheel.Shape, gpu string, device schedule.Device) []flywheel.Record {
	t, _ := ir.Target(gpu)
	rng := rand.New(rand.NewPCG(99, 1))
	kind := trial.KindPredicted
	if device == schedule.DeviceCUDA {
		kind = trial.KindMeasuredGPU
	}
	var out []flywheel.Record
	for range n {
		p := schedule.Random(rng, t, device).Normalize()
		lat := fakeLatency(p)
		out = append(out, flywheel.Record{Model: "toy2", GPU: gpu, Regime: flywheel.RegimeSingle,
			Correctness: flywheel.CorrectPass, LatencyUS: lat, BoundUS: 1, PctOfRoofline: lat * 100,
			Schedule: p.Value(), LatencyKind: string(kind), Shape: shape, ShapeSource: flywheel.ShapeFromConfig})
	}
	return out
}

type harness struct {
	t      *testing.T
	c      *Campaign
	now    time.Time
	reload bool
}

// args is a parsed command line: the verb, positional words and key=value pairs.
type args struct {
	verb  string
	words []string
	kv    map[string]string
}

func parseArgs(line string) (args, error) {
	a := args{kv: map[string]string{}}
	var toks []string
	for line = strings.TrimSpace(line); line != ""; line = strings.TrimSpace(line) {
		i := 0
		for i < len(line) && line[i] != ' ' {
			if line[i] == '"' {
				j := strings.IndexByte(line[i+1:], '"')
				if j < 0 {
					return a, fmt.Errorf("unterminated quote in %q", line)
				}
				i += j + 1
			}
			i++
		}
		toks = append(toks, line[:i])
		line = line[i:]
	}
	if len(toks) == 0 {
		return a, fmt.Errorf("empty command")
	}
	a.verb = toks[0]
	for _, tok := range toks[1:] {
		if k, v, ok := strings.Cut(tok, "="); ok {
			a.kv[k] = strings.Trim(v, `"`)
		} else {
			a.words = append(a.words, tok)
		}
	}
	return a, nil
}

func (a args) has(k string) bool { _, ok := a.kv[k]; return ok }

func (a args) str(k, def string) string {
	if v, ok := a.kv[k]; ok {
		return v
	}
	return def
}

func (a args) int(k string, def int) int {
	if v, ok := a.kv[k]; ok {
		n, err := strconv.Atoi(v)
		if err != nil {
			panic(fmt.Sprintf("%s=%q is not an int", k, v))
		}
		return n
	}
	return def
}

func (a args) float(k string, def float64) float64 {
	if v, ok := a.kv[k]; ok {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			panic(fmt.Sprintf("%s=%q is not a number", k, v))
		}
		return f
	}
	return def
}

func (a args) fptr(k string) *float64 {
	if !a.has(k) || a.kv[k] == "none" {
		return nil
	}
	f := a.float(k, 0)
	return &f
}

func (a args) flag(k string) bool { return a.str(k, "false") == "true" }

// advance parses "+5m", "+90s", "+2h".
func advance(s string) time.Duration {
	d, err := time.ParseDuration(strings.TrimPrefix(s, "+"))
	if err != nil {
		panic(fmt.Sprintf("bad duration %q", s))
	}
	return d
}

func (h *harness) exec(line string) string {
	a, err := parseArgs(line)
	if err != nil {
		return "error: " + err.Error()
	}
	if at, ok := a.kv["at"]; ok {
		h.now = h.now.Add(advance(at))
	}
	out := h.run(a)
	if h.reload && h.c != nil && h.c.started {
		h.roundTrip()
	}
	return out
}

func (h *harness) roundTrip() {
	data, err := h.c.Marshal()
	if err != nil {
		h.t.Fatalf("marshal: %v", err)
	}
	c, err := Load(data)
	if err != nil {
		h.t.Fatalf("load: %v", err)
	}
	again, err := c.Marshal()
	if err != nil || string(again) != string(data) {
		h.t.Fatalf("state does not round-trip: %v", err)
	}
	h.c = c
}

func (h *harness) step(ev Event) string {
	d, err := h.c.Step(ev)
	return h.render(d, err)
}

func (h *harness) run(a args) string {
	switch a.verb {
	case "start":
		return h.start(a)
	case "propose":
		return h.step(Propose{Time: h.now, N: a.int("n", 1)})
	case "finish":
		if len(a.words) > 0 && a.words[0] == "all" {
			var b strings.Builder
			for _, id := range h.c.inFlightIDs() {
				b.WriteString(h.step(Finished{Time: h.now, Outcome: h.verdict(id, args{kv: map[string]string{}})}))
			}
			return b.String()
		}
		return h.step(Finished{Time: h.now, Outcome: h.verdict(a.int("trial", -1), a), Regions: regions(a.str("regions", ""))})
	case "fail":
		o := trial.Outcome{CampaignID: a.str("campaign", ""), TrialID: a.int("trial", -1),
			Failure: &trial.Failure{Class: trial.FailClass(a.str("class", string(trial.FailCrash))), Phase: a.str("phase", ""), Message: a.str("msg", "boom")}}
		return h.step(Finished{Time: h.now, Outcome: o})
	case "tick":
		if len(a.words) > 0 {
			h.now = h.now.Add(advance(a.words[0]))
		}
		return h.step(Tick{Time: h.now})
	case "pause", "resume", "stop":
		return h.step(Command{Time: h.now, Op: a.verb, Note: a.str("note", "")})
	case "reopen", "budget", "criteria":
		cmd := Command{Time: h.now, Op: a.verb, Note: a.str("note", "")}
		if a.has("iters") || a.has("minutes") {
			cmd.Budget = &Budget{Iterations: a.int("iters", 0), Minutes: a.float("minutes", 0)}
		}
		if a.has("consecutive_reverts") || a.has("pct_target") || a.has("max_minutes") || a.has("speedup_target") {
			m := h.c.st.Settings.MoveOn
			m.ConsecutiveReverts = a.int("consecutive_reverts", m.ConsecutiveReverts)
			m.PctRooflineTarget = a.float("pct_target", m.PctRooflineTarget)
			m.MaxMinutes = a.float("max_minutes", m.MaxMinutes)
			m.SpeedupTarget = a.float("speedup_target", m.SpeedupTarget)
			cmd.MoveOn = &m
		}
		return h.step(cmd)
	case "record":
		rec := Record{Time: h.now, Status: strings.Join(a.words, " "), Correctness: a.str("correctness", ""),
			LatencyUS: a.fptr("latency"), PctOfRoofline: a.fptr("pct"), BoundUS: a.fptr("bound"),
			Kind: trial.LatencyKind(a.str("kind", "")), ScheduleID: a.str("id", ""), Description: a.str("desc", ""),
			Source: a.str("source", ""), Regions: regions(a.str("regions", ""))}
		if cfg := a.str("config", ""); cfg != "" {
			rec.Point = json.RawMessage(cfg)
		}
		return h.step(rec)
	case "run":
		return h.runLoop(a)
	case "status":
		if len(a.words) > 0 && a.words[0] == "json" {
			return jsonText(h.c.StatusReport(h.now))
		}
		return h.c.StatusText(h.now)
	case "next":
		n := h.c.Next(h.now)
		if len(a.words) > 0 && a.words[0] == "json" {
			return jsonText(n)
		}
		return n.Text()
	case "report":
		return h.c.ReportMarkdown(h.now)
	case "wakeup":
		w := h.c.WakeUp(h.now)
		if len(a.words) > 0 && a.words[0] == "json" {
			n := len(w.Trajectory)
			w.Trajectory = nil
			return jsonText(w) + fmt.Sprintf("trajectory: %d points\n", n)
		}
		return w.Markdown()
	case "trajectory":
		return h.trajectory()
	case "state":
		return h.stateSummary()
	case "reload":
		h.roundTrip()
		return "reloaded\n"
	}
	return "error: unknown command " + a.verb + "\n"
}

func (h *harness) start(a args) string {
	s := DefaultSettings()
	s.Overnight = a.flag("overnight")
	s.RestartAfter = a.int("restart_after", s.RestartAfter)
	s.Budget = Budget{Iterations: a.int("iters", 0), Minutes: a.float("minutes", 0)}
	s.MoveOn.ConsecutiveReverts = a.int("consecutive_reverts", s.MoveOn.ConsecutiveReverts)
	s.MoveOn.PctRooflineTarget = a.float("pct_target", s.MoveOn.PctRooflineTarget)
	s.MoveOn.MaxMinutes = a.float("max_minutes", s.MoveOn.MaxMinutes)
	s.MoveOn.SpeedupTarget = a.float("speedup_target", s.MoveOn.SpeedupTarget)
	s.MinGain = a.float("min_gain", s.MinGain)
	s.Explore = a.float("explore", s.Explore)
	s.Epsilon = a.float("epsilon", s.Epsilon)
	s.MaxDraws = a.int("max_draws", s.MaxDraws)
	// Scripts written before the model proposer existed pin the reference
	// proposer and the fixed plateau threshold; a script opts in with
	// proposer=model and plateau_scaling=true.
	s.Proposer = a.str("proposer", ProposerReference)
	s.PlateauScaling = a.flag("plateau_scaling")
	device := schedule.Device(a.str("device", "cpu"))
	gpu := a.str("gpu", "h200")
	ev := Start{Time: h.now, Model: a.str("model", "toy"), Label: a.str("label", ""), GPU: gpu,
		Device: device, Name: a.str("name", ""), Seed: uint64(a.int("seed", 1)), Shape: toyShape,
		Cold: a.flag("cold"), Settings: s, Env: flywheel.Env{AMKVersion: "test"}}
	if n := a.int("prior", 0); n > 0 {
		ev.Corpus = fakeCorpus(n, nearShape, gpu, device)
	}
	if h.c == nil {
		h.c = New()
	}
	return h.step(ev)
}

// verdict builds an outcome for a trial from script arguments; the latency
// defaults to fakeLatency of the trial's point.
func (h *harness) verdict(id int, a args) trial.Outcome {
	o := trial.Outcome{CampaignID: a.str("campaign", ""), TrialID: id, Worker: a.str("worker", ""),
		Ratio: a.fptr("ratio"), IncumbentUS: a.fptr("incumbent")}
	v := &trial.Verdict{Valid: a.str("valid", "true") == "true", GPU: h.c.st.GPU, Model: h.c.st.Model, Device: string(h.c.st.Device)}
	if !v.Valid {
		reason := a.str("reason", "rejected")
		v.RejectedReason = &reason
		o.Verdict = v
		return o
	}
	correct := a.str("correct", "true") == "true"
	v.Correct = &correct
	if correct && a.str("latency", "") != "none" {
		lat := 1.0
		if inf, ok := h.c.st.InFlight[id]; ok {
			if p, err := schedule.ParsePoint(inf.Spec.Point); err == nil {
				lat = fakeLatency(p)
			}
		}
		lat = a.float("latency", lat)
		kind := trial.LatencyKind(a.str("kind", string(h.c.st.LatencyKind)))
		v.LatencyUS, v.LatencyKind = &lat, &kind
		if b := a.str("bound", "1"); b != "none" {
			bound := a.float("bound", 1)
			v.BoundUS = &bound
			pct := round3(lat / bound * 100)
			v.PctOfRoofline = &pct
		}
		if a.has("pct") {
			v.PctOfRoofline = a.fptr("pct")
		}
	}
	o.Verdict = v
	return o
}

func regions(s string) map[string]float64 {
	if s == "" {
		return nil
	}
	m := map[string]float64{}
	for kv := range strings.SplitSeq(s, ",") {
		k, v, _ := strings.Cut(kv, ":")
		f, _ := strconv.ParseFloat(v, 64)
		m[k] = f
	}
	return m
}

// runLoop drives the campaign like a dispatcher with a fixed worker count,
// finishing the oldest (or newest) in-flight trial with its fake latency.
func (h *harness) runLoop(a args) string {
	n, workers, newest := a.int("n", 10), a.int("workers", 1), a.str("order", "oldest") == "newest"
	quiet := a.flag("quiet")
	var b strings.Builder
	for done := 0; done < n; {
		if free := workers - len(h.c.st.InFlight); free > 0 {
			d, err := h.c.Step(Propose{Time: h.now, N: free})
			if err != nil {
				fmt.Fprintf(&b, "error: %v\n", err)
				break
			}
			for _, l := range d.Log {
				if !quiet && strings.HasPrefix(l, "basin-hop") || strings.HasPrefix(l, "search space") || strings.HasPrefix(l, "campaign done") {
					fmt.Fprintf(&b, "  %s\n", l)
				}
			}
		}
		ids := h.c.inFlightIDs()
		if len(ids) == 0 {
			b.WriteString("  nothing in flight\n")
			break
		}
		id := ids[0]
		if newest {
			id = ids[len(ids)-1]
		}
		h.now = h.now.Add(time.Minute)
		d, err := h.c.Step(Finished{Time: h.now, Outcome: h.verdict(id, args{kv: map[string]string{}})})
		if err != nil {
			fmt.Fprintf(&b, "error: %v\n", err)
			break
		}
		done++
		for _, r := range d.Rows {
			if quiet {
				break
			}
			fmt.Fprintf(&b, "%3d t%-3d %-9s %-6s %s %s\n", r.Experiment, id, h.sourceOf(r), r.Tag, latText(r.LatencyUS), bestText(h.c))
		}
		for _, l := range d.Log {
			if !quiet && strings.HasPrefix(l, "region") || strings.HasPrefix(l, "campaign done") || !quiet && strings.HasPrefix(l, "baseline") {
				fmt.Fprintf(&b, "  %s\n", l)
			}
		}
		if h.reload && done%max(1, n/40) == 0 {
			h.roundTrip() // at most ~40 reloads per run keeps long runs fast
		}
	}
	fmt.Fprintf(&b, "status %s, %d experiments, %d kept, %d restarts\n", h.c.st.Status, h.c.st.ExperimentsRun, h.c.st.ExperimentsKept, h.c.st.Restarts)
	return b.String()
}

func (h *harness) sourceOf(r flywheel.Row) string {
	src, _, _ := strings.Cut(r.Description, ":")
	return src
}

func latText(f *float64) string {
	if f == nil {
		return "       -"
	}
	return fmt.Sprintf("%8.3f", *f)
}

func bestText(c *Campaign) string {
	if c.st.Best == nil {
		return "best -"
	}
	return fmt.Sprintf("best %.3f", c.st.Best.LatencyUS)
}

func (h *harness) render(d Decision, err error) string {
	var b strings.Builder
	for _, s := range d.Enqueue {
		p, perr := schedule.ParsePoint(s.Point)
		desc := "unparsable point"
		if perr == nil {
			desc = pointText(p, h.c.st.Device)
		}
		fmt.Fprintf(&b, "enqueue trial %d %s %s %s", s.TrialID, s.Source, p.ID(), desc)
		if len(s.Incumbent) > 0 {
			if ip, err := schedule.ParsePoint(s.Incumbent); err == nil {
				fmt.Fprintf(&b, " vs %s", ip.ID())
			}
		}
		b.WriteString("\n")
	}
	for _, r := range d.Rows {
		fmt.Fprintf(&b, "row %d %s %s lat=%s pct=%s %s | %s\n", r.Experiment, r.Tag, r.Correctness,
			optText(r.LatencyUS), optText(r.PctOfRoofline), r.ScheduleID, r.Description)
	}
	for _, r := range d.Corpus {
		fmt.Fprintf(&b, "corpus %s %s lat=%v bound=%v pct=%v %s | %s\n", r.Model, r.GPU, r.LatencyUS, r.BoundUS,
			r.PctOfRoofline, r.LatencyKind, r.Notes)
	}
	for _, l := range d.Log {
		fmt.Fprintf(&b, "log: %s\n", l)
	}
	if err != nil {
		fmt.Fprintf(&b, "error: %v\n", err)
	}
	fmt.Fprintf(&b, "status: %s\n", d.Status)
	return b.String()
}

func optText(f *float64) string {
	if f == nil {
		return "-"
	}
	return strconv.FormatFloat(*f, 'f', -1, 64)
}

func pointText(p schedule.Point, device schedule.Device) string {
	s := fmt.Sprintf("{N_tile=%s np=%s sm=%s depth=%d tpb=%d",
		knob(p, schedule.PathNTile), knob(p, schedule.PathNPartitions), strings.Trim(knob(p, schedule.PathSMAssignment), `"`),
		p.Config.PipeliningDepth, p.Config.ThreadsPerBlock)
	if tps := knob(p, schedule.PathTilesPerSM); tps != "0" {
		s += " tps=" + tps
	}
	if knob(p, schedule.PathKVHeadSplit) != "0" {
		s += " split=1"
	}
	if knob(p, schedule.PathHeadCounters) != "0" {
		s += " hc=1"
	}
	if n := len(p.Config.FusionGrouping); n > 0 {
		s += fmt.Sprintf(" fused=%d", n)
	}
	if v := p.Knobs["ring_stages"]; v > 0 {
		s += fmt.Sprintf(" ring=%dx%s", v, knob(p, "kernel_knobs.ring_tile"))
	}
	if device == schedule.DeviceCUDA {
		s += fmt.Sprintf(" smem=%d cpw=%d cpa=%d st=%d cols=%d", p.Config.SmemBytesPerBlock,
			p.Knobs["cols_per_warp"], p.Knobs["cpasync"], p.Knobs["cpa_stages"], p.Knobs["cpa_cols"])
	}
	return s + fmt.Sprintf(" cx=%d}", p.Complexity())
}

func knob(p schedule.Point, path string) string {
	v := p.KnobValue(path)
	if v.Kind == 0 {
		return "auto"
	}
	return pyjsonCompact(v)
}

func jsonText(v any) string {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return "error: " + err.Error() + "\n"
	}
	return string(data) + "\n"
}

func (h *harness) stateSummary() string {
	st := &h.c.st
	var b strings.Builder
	fmt.Fprintf(&b, "id=%s status=%s reason=%q\n", st.ID, st.Status, st.MoveOnReason)
	fmt.Fprintf(&b, "experiments=%d kept=%d reverts=%d streak=%d restarts=%d region=%d\n",
		st.ExperimentsRun, st.ExperimentsKept, st.ConsecutiveReverts, st.NonImprovement, st.Restarts, st.Region)
	fmt.Fprintf(&b, "in_flight=%v next_trial=%d tried=%d queue=%d elapsed=%.2fmin\n",
		h.c.inFlightIDs(), st.NextTrial, len(st.Tried), len(st.Queue), h.c.ElapsedMinutes(h.now))
	fmt.Fprintf(&b, "counts=%+v\n", st.Counts)
	for _, r := range []struct {
		name string
		r    *Result
	}{{"baseline", st.Baseline}, {"best", st.Best}} {
		if r.r == nil {
			fmt.Fprintf(&b, "%s=none\n", r.name)
			continue
		}
		fmt.Fprintf(&b, "%s=%s lat=%v score=%v kind=%s source=%s trial=%d complexity=%d\n", r.name, r.r.ScheduleID,
			r.r.LatencyUS, r.r.Score, r.r.Kind, r.r.Source, r.r.Trial, r.r.Complexity)
	}
	if st.Anchor != nil {
		score := "none"
		if st.Anchor.Score != nil {
			score = strconv.FormatFloat(*st.Anchor.Score, 'f', -1, 64)
		}
		fmt.Fprintf(&b, "anchor=%s score=%s\n", st.Anchor.ScheduleID, score)
	}
	if sp := h.c.Speedup(); sp != nil {
		fmt.Fprintf(&b, "speedup=%v\n", *sp)
	}
	fmt.Fprintf(&b, "prior_examples=%d ranker=%s\n", len(st.Prior), h.c.rankerStatus())
	return b.String()
}

func (h *harness) trajectory() string {
	var b strings.Builder
	for _, t := range h.c.st.Trajectory {
		fmt.Fprintf(&b, "%d t%d %.1fmin %s %s lat=%s best=%s kept=%v\n", t.Experiment, t.Trial, t.Minutes, t.Source, t.Tag,
			optText(t.LatencyUS), optText(t.BestUS), t.Kept)
	}
	return b.String()
}

// --- the script runner ---

type testCase struct {
	cmd      string
	expected string
	line     int
}

func readScript(t *testing.T, path string) []testCase {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	var cases []testCase
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if strings.TrimSpace(l) == "" || strings.HasPrefix(l, "#") {
			continue
		}
		tc := testCase{cmd: l, line: i + 1}
		i++
		if i >= len(lines) || lines[i] != "----" {
			t.Fatalf("%s:%d: command without ----", path, tc.line)
		}
		i++
		var out []string
		if i < len(lines) && lines[i] == "----" {
			for i++; i < len(lines) && !(lines[i] == "----" && i+1 < len(lines) && lines[i+1] == "----"); i++ {
				out = append(out, lines[i])
			}
			i++
		} else {
			for ; i < len(lines) && lines[i] != ""; i++ {
				out = append(out, lines[i])
			}
		}
		tc.expected = strings.Join(out, "\n")
		cases = append(cases, tc)
	}
	return cases
}

func writeScript(path string, cases []testCase, outputs []string, comments map[int][]string) error {
	var b strings.Builder
	for i, tc := range cases {
		for _, c := range comments[i] {
			b.WriteString(c + "\n")
		}
		out := strings.TrimRight(outputs[i], "\n")
		b.WriteString(tc.cmd + "\n----\n")
		if strings.Contains(out, "\n\n") || strings.HasPrefix(out, "\n") || out == "" {
			b.WriteString("----\n" + out + "\n----\n----\n")
		} else {
			b.WriteString(out + "\n")
		}
		b.WriteString("\n")
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// scriptComments keeps each case's preceding comment lines for -rewrite.
func scriptComments(path string) map[int][]string {
	data, _ := os.ReadFile(path)
	out := map[int][]string{}
	var pending []string
	n := 0
	lines := strings.Split(string(data), "\n")
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		switch {
		case strings.HasPrefix(l, "#"):
			pending = append(pending, l)
		case strings.TrimSpace(l) == "":
		default:
			out[n] = pending
			pending = nil
			n++
			// skip the case body
			i++
			i++
			if i < len(lines) && lines[i] == "----" {
				for i++; i < len(lines) && !(lines[i] == "----" && i+1 < len(lines) && lines[i+1] == "----"); i++ {
				}
				i++
			} else {
				for ; i < len(lines) && lines[i] != ""; i++ {
				}
			}
		}
	}
	return out
}

func runScript(t *testing.T, path string, reload bool) []string {
	cases := readScript(t, path)
	h := &harness{t: t, now: epoch, reload: reload}
	var outputs []string
	for _, tc := range cases {
		out := strings.TrimRight(h.exec(tc.cmd), "\n")
		outputs = append(outputs, out)
		if !*rewrite && out != tc.expected {
			t.Errorf("%s:%d: %s (reload=%v)\n--- got:\n%s\n--- want:\n%s", path, tc.line, tc.cmd, reload, out, tc.expected)
		}
	}
	return outputs
}

func TestScripts(t *testing.T) {
	paths, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	sort.Strings(paths)
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			if *rewrite {
				outs := runScript(t, path, false)
				if err := writeScript(path, readScript(t, path), outs, scriptComments(path)); err != nil {
					t.Fatal(err)
				}
				return
			}
			runScript(t, path, false)
			// Resume: serialising and reloading the state after every
			// command must not change a single decision.
			runScript(t, path, true)
		})
	}
}

func verdictOf(correct *bool, lat *float64, kind *trial.LatencyKind, bound *float64) *trial.Verdict {
	v := &trial.Verdict{Valid: true, Correct: correct, LatencyUS: lat, LatencyKind: kind, BoundUS: bound}
	if lat != nil && bound != nil {
		v.PctOfRoofline = new(round3(*lat / *bound * 100))
	}
	return v
}
