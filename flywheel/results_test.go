package flywheel

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/amk-dev/amk/internal/proctest"
)

var nastyDescriptions = []string{
	"plain",
	"tab\there",
	"new\nline",
	"carriage\rreturn\r\n",
	`back\slash`,
	`\t literal backslash-t, not a tab`,
	"\\\t\\n\n\\",
	"trailing backslash \\",
	"unicode ✓ ünïcödé\t🚀",
	"",
}

func TestEscapeRoundTrip(t *testing.T) {
	for _, s := range nastyDescriptions {
		e := Escape(s)
		if strings.ContainsAny(e, "\t\n\r") {
			t.Errorf("Escape(%q) = %q still holds a separator", s, e)
		}
		if got := Unescape(e); got != s {
			t.Errorf("Unescape(Escape(%q)) = %q", s, got)
		}
	}
}

func TestAppendReadRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "deep", "dir", "results.tsv")
	var want []Row
	for i, d := range nastyDescriptions {
		r := Row{Experiment: i + 1, Tag: TagTried, Loop: LoopSchedule, Model: "toy\tmodel", GPU: "h200",
			Regime: RegimeSingle, Correctness: CorrectPass, LatencyUS: new(100.5 + float64(i)),
			PctOfRoofline: new(1234.5), ScheduleID: "sch_0123456789", Description: d}
		if i%3 == 1 {
			r.Tag, r.Correctness, r.LatencyUS, r.PctOfRoofline = TagRejected, CorrectRejected, nil, nil
		}
		want = append(want, r)
	}
	if err := AppendRows(path, want[:3]...); err != nil {
		t.Fatal(err)
	}
	for _, r := range want[3:] {
		if err := AppendRows(path, r); err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), HeaderLine+"\n"); n != 1 {
		t.Fatalf("header written %d times", n)
	}
	if lines := strings.Count(string(data), "\n"); lines != len(want)+1 {
		t.Fatalf("%d lines, want %d (one per row plus the header)", lines, len(want)+1)
	}
	got, err := ReadRows(path)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(rowsText(got)) != fmt.Sprint(rowsText(want)) {
		t.Fatalf("round trip:\n got %q\nwant %q", rowsText(got), rowsText(want))
	}
}

func rowsText(rows []Row) []string {
	var out []string
	for _, r := range rows {
		out = append(out, r.Line())
	}
	return out
}

func TestAppendRefusesDishonestRows(t *testing.T) {
	path := filepath.Join(t.TempDir(), "results.tsv")
	bad := []Row{
		{Experiment: 1, Tag: TagKept},
		{Experiment: 1, Tag: TagRevert, Correctness: CorrectFail, LatencyUS: new(3.0)},
		{Experiment: 1, Tag: TagKept, Correctness: CorrectPass, LatencyUS: new(posInf())},
		{Experiment: -1, Tag: TagKept, Correctness: CorrectPass},
	}
	for _, r := range bad {
		if err := AppendRows(path, Row{Experiment: 9, Correctness: CorrectPass}, r); err == nil {
			t.Errorf("row %+v accepted", r)
		}
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("a refused batch still touched the file: %v", err)
	}
}

func posInf() float64 { f, _ := strconv.ParseFloat("inf", 64); return f }

func TestAppendRefusesForeignFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "results.tsv")
	if err := os.WriteFile(path, []byte("a\tb\tc\n1\t2\t3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := AppendRows(path, Row{Experiment: 1, Tag: TagKept, Correctness: CorrectPass})
	if err == nil || !strings.Contains(err.Error(), "not a results.tsv") {
		t.Fatalf("err = %v", err)
	}
}

func TestTornTailRepaired(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "results.tsv")
	row := func(n int) Row {
		return Row{Experiment: n, Tag: TagKept, Loop: LoopSchedule, Correctness: CorrectPass, LatencyUS: new(float64(n))}
	}
	if err := AppendRows(path, row(1), row(2)); err != nil {
		t.Fatal(err)
	}
	// A writer crashed halfway through row 3.
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("3\tkept\tsched"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	rows, err := ReadRows(path)
	if err != nil || len(rows) != 2 {
		t.Fatalf("reader must ignore the torn row: %d rows, %v", len(rows), err)
	}
	if err := AppendRows(path, row(3)); err != nil {
		t.Fatal(err)
	}
	rows, err = ReadRows(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 3 || rows[2].Experiment != 3 || rows[2].Loop != LoopSchedule {
		t.Fatalf("after repair: %+v", rows)
	}
	data, _ := os.ReadFile(path)
	if strings.Contains(string(data), "sched3") || strings.Count(string(data), "\n") != 4 {
		t.Fatalf("torn tail left behind:\n%s", data)
	}

	// A torn header: the first writer died before finishing it.
	path2 := filepath.Join(dir, "torn-header.tsv")
	if err := os.WriteFile(path2, []byte("experiment\ttag\tlo"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := AppendRows(path2, row(1)); err != nil {
		t.Fatal(err)
	}
	data, _ = os.ReadFile(path2)
	if want := HeaderLine + "\n" + (&Row{Experiment: 1, Tag: TagKept, Loop: LoopSchedule, Correctness: CorrectPass, LatencyUS: new(1.0)}).Line(); string(data) != want {
		t.Fatalf("torn header not repaired:\n%q\nwant\n%q", data, want)
	}
}

// The child-process side of TestConcurrentAppenders.
func TestHelperAppender(t *testing.T) {
	path := os.Getenv("AMK_FLYWHEEL_APPEND_PATH")
	if path == "" {
		t.Skip("helper process only")
	}
	appendMany(t, path, "child", 25)
}

func appendMany(t *testing.T, path, who string, n int) {
	for i := range n {
		r := Row{Experiment: i, Tag: TagTried, Correctness: CorrectPass, LatencyUS: new(float64(i)),
			Description: who + "\tline\n" + strconv.Itoa(i)}
		if err := AppendRows(path, r); err != nil {
			t.Error(err)
			return
		}
	}
}

func TestConcurrentAppenders(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shared", "results.tsv")
	const goroutines, perWriter, children = 6, 25, 2
	var cmds []*exec.Cmd
	for range children {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperAppender$", "-test.count=1")
		cmd.Env = append(os.Environ(), "AMK_FLYWHEEL_APPEND_PATH="+path)
		if err := proctest.Start(t, cmd); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			appendMany(t, path, "goroutine"+strconv.Itoa(g), perWriter)
		})
	}
	wg.Wait()
	for _, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("child appender: %v", err)
		}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), HeaderLine); n != 1 {
		t.Fatalf("header written %d times", n)
	}
	rows, err := ReadRows(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := (goroutines + children) * perWriter; len(rows) != want {
		t.Fatalf("%d rows, want %d", len(rows), want)
	}
	perWho := map[string]int{}
	for _, r := range rows {
		who, rest, ok := strings.Cut(r.Description, "\tline\n")
		if !ok || rest != strconv.Itoa(r.Experiment) {
			t.Fatalf("row mangled: %+v", r)
		}
		perWho[who]++
	}
	if perWho["child"] != children*perWriter {
		t.Fatalf("child rows: %d", perWho["child"])
	}
}

func TestParseRowsErrors(t *testing.T) {
	cases := map[string]string{
		"missing column": "experiment\ttag\n1\tkept\n",
		"short row":      HeaderLine + "\n1\tkept\n",
		"bad experiment": HeaderLine + "\nx" + strings.Repeat("\t", 11) + "\n",
		"bad latency":    HeaderLine + "\n1\tkept\tschedule\tm\tg\tr\tPASS\tfast\t\t\t\t\n",
	}
	for name, in := range cases {
		if _, err := ParseRows([]byte(in)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	rows, err := ParseRows([]byte(HeaderLine + "\n\n1\tkept\tschedule\tm\tg\tr\tPASS\t12.5\t\ts\t\td\n2\tkep"))
	if err != nil || len(rows) != 1 || *rows[0].LatencyUS != 12.5 {
		t.Fatalf("rows %+v err %v", rows, err)
	}
}

func FuzzReadRows(f *testing.F) {
	f.Add([]byte(HeaderLine + "\n1\tkept\tschedule\ttoy\th200\tsingle-stream\tPASS\t12.5\t1000.0\tsch_1\t\ta\\tb\\\\\n"))
	f.Add([]byte(HeaderLine + "\n1\tkept\tschedule\ttoy\th200\tsingle-stream\tPASS\t12.5\t1000.0\tsch_1\t\ttorn"))
	f.Add([]byte("experiment\ttag\n"))
	f.Add([]byte(""))
	f.Add([]byte(HeaderLine + "\textra\n3\trejected\tschedule\tm\tg\tr\tREJECTED\t\t\t\t\t\\x\tcol\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		rows, err := ParseRows(data)
		if err != nil {
			return
		}
		// Whatever parsed re-renders to lines that parse back to the same rows.
		var b strings.Builder
		b.WriteString(HeaderLine + "\n")
		for i := range rows {
			b.WriteString(rows[i].Line())
		}
		again, err := ParseRows([]byte(b.String()))
		if err != nil {
			t.Fatalf("re-rendered rows do not parse: %v", err)
		}
		if len(again) != len(rows) {
			t.Fatalf("%d rows became %d", len(rows), len(again))
		}
		for i := range rows {
			if again[i].Line() != rows[i].Line() {
				t.Fatalf("row %d: %q became %q", i, rows[i].Line(), again[i].Line())
			}
		}
	})
}

// Clip counts runes, as Python's s[:n] does, never cutting one in half.
func TestClipCountsRunes(t *testing.T) {
	for _, c := range []struct {
		s    string
		n    int
		want string
	}{{"abc", 5, "abc"}, {"abcdef", 3, "abc"}, {"héllo wörld", 4, "héll"}, {"µs", 1, "µ"}, {"x", 0, ""}} {
		if got := Clip(c.s, c.n); got != c.want {
			t.Errorf("Clip(%q, %d) = %q, want %q", c.s, c.n, got, c.want)
		}
	}
}
