package fib

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/amk-dev/amk/inputfile"
)

// MaxDatasetFiles bounds how many files a dataset walk reads.
const MaxDatasetFiles = 20000

// Record kinds of a dataset file.
const (
	KindDefinition = "definition"
	KindWorkload   = "workload"
	KindTrace      = "trace"
	KindSolution   = "solution"
)

// FileReport is what checking one file (or one JSONL line) found.
type FileReport struct {
	Path string
	Line int // JSONL line, 0 for a JSON file
	Kind string
	Name string // the Definition's or Solution's name, the Trace's definition
	// Err is set when the file is not JSON or not a record of its kind.
	Err      error
	Problems []Problem
}

// Where is the report's location: path or path:line.
func (r *FileReport) Where() string {
	if r.Line > 0 {
		return fmt.Sprintf("%s:%d", r.Path, r.Line)
	}
	return r.Path
}

// Dataset is what ReadDataset found: every record that decoded, by
// Definition name, and a report per file or line.
type Dataset struct {
	Definitions map[string]*Definition
	DefPaths    map[string]string
	Workloads   map[string][]Workload
	Traces      map[string][]Trace
	Solutions   []*Solution
	// Broken names the Definitions that break a rule, with the first.
	Broken  map[string]string
	Reports []FileReport
	// single is set when one file was read: a workload or trace line whose
	// Definition is elsewhere is then a warning, not a broken rule.
	single bool
}

// ReadDataset reads a file or a directory. A directory is walked: *.json
// files are Definitions, except under a solutions/ directory (Solutions);
// *.jsonl files under workloads/ hold workload entries and elsewhere
// Traces. Workloads and Traces are checked against the Definitions of the
// same walk (by name). The error is for a path that cannot be read at all.
func ReadDataset(path string) (*Dataset, error) {
	ds := &Dataset{Definitions: map[string]*Definition{}, DefPaths: map[string]string{},
		Workloads: map[string][]Workload{}, Traces: map[string][]Trace{}, Broken: map[string]string{}}
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	var files []string
	if !info.IsDir() {
		files, ds.single = []string{path}, true
	} else {
		err := filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if p != path && strings.HasPrefix(d.Name(), ".") {
					return filepath.SkipDir
				}
				return nil
			}
			if strings.HasSuffix(p, ".json") || strings.HasSuffix(p, ".jsonl") {
				files = append(files, p)
				if len(files) > MaxDatasetFiles {
					return fmt.Errorf("more than %d JSON files under %s", MaxDatasetFiles, path)
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	slices.Sort(files)
	var lines []jsonlFile
	for _, f := range files {
		rel := f
		if info.IsDir() {
			if r, err := filepath.Rel(path, f); err == nil {
				rel = r
			}
		}
		parts := strings.Split(filepath.ToSlash(rel), "/")
		switch {
		case strings.HasSuffix(f, ".jsonl"):
			kind := KindTrace
			if slices.Contains(parts[:len(parts)-1], "workloads") {
				kind = KindWorkload
			}
			lines = append(lines, jsonlFile{f, kind})
		case slices.Contains(parts[:len(parts)-1], "solutions"):
			ds.readSolution(f)
		default:
			ds.readDefinition(f)
		}
	}
	for _, f := range lines {
		ds.readLines(f.path, f.kind)
	}
	return ds, nil
}

type jsonlFile struct{ path, kind string }

// readBounded reads a dataset file: a regular file of at most MaxFileBytes.
func readBounded(path string) ([]byte, error) { return inputfile.ReadFile(path, MaxFileBytes) }

func (ds *Dataset) readDefinition(path string) {
	r := FileReport{Path: path, Kind: KindDefinition}
	defer func() { ds.Reports = append(ds.Reports, r) }()
	data, err := readBounded(path)
	if err != nil {
		r.Err = err
		return
	}
	d, ps, err := CheckDefinition(data)
	if err != nil {
		r.Err = err
		return
	}
	r.Name, r.Problems = d.Name, ps
	if d.Name == "" {
		return
	}
	if prev, dup := ds.DefPaths[d.Name]; dup {
		r.Problems = append(r.Problems, Problem{Field: "name", Level: Error,
			Reason: fmt.Sprintf("%q is also the name of %s: Definition names are unique", d.Name, prev)})
		return
	}
	if want := d.Name + ".json"; filepath.Base(path) != want {
		r.Problems = append(r.Problems, Problem{Field: "name", Level: Warning,
			Reason: fmt.Sprintf("the dataset stores this Definition as definitions/%s/%s", d.OpType, want)})
	}
	ds.Definitions[d.Name] = d
	ds.DefPaths[d.Name] = path
	if errs := Errors(r.Problems); len(errs) > 0 {
		ds.Broken[d.Name] = errs[0].String()
	}
}

func (ds *Dataset) readSolution(path string) {
	r := FileReport{Path: path, Kind: KindSolution}
	defer func() { ds.Reports = append(ds.Reports, r) }()
	data, err := readBounded(path)
	if err != nil {
		r.Err = err
		return
	}
	s, err := ParseSolution(data)
	if err != nil {
		r.Err = err
		return
	}
	r.Name, r.Problems = s.Name, ValidateSolution(s)
	ds.Solutions = append(ds.Solutions, s)
}

func (ds *Dataset) readLines(path, kind string) {
	f, _, err := inputfile.Open(path) // regular files only, never blocks
	if err != nil {
		ds.Reports = append(ds.Reports, FileReport{Path: path, Kind: kind, Err: err})
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), MaxFileBytes)
	n := 0
	for sc.Scan() {
		n++
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		r := FileReport{Path: path, Line: n, Kind: kind}
		t, err := ParseTrace(line)
		if err != nil {
			r.Err = err
			ds.Reports = append(ds.Reports, r)
			continue
		}
		r.Name = t.Definition
		d := ds.Definitions[t.Definition]
		if d == nil {
			level := Error
			if ds.single {
				level = Warning
			}
			r.Problems = append(r.Problems, Problem{Field: "definition", Level: level,
				Reason: fmt.Sprintf("no Definition %q read with it: only its structure is checked", t.Definition)})
		}
		r.Problems = append(r.Problems, ValidateTrace(d, t)...)
		if kind == KindWorkload && !t.WorkloadOnly() {
			r.Problems = append(r.Problems, Problem{Field: "solution", Level: Error,
				Reason: "a workloads/ entry has neither solution nor evaluation"})
		}
		if kind == KindWorkload {
			ds.Workloads[t.Definition] = append(ds.Workloads[t.Definition], t.Workload)
		} else {
			ds.Traces[t.Definition] = append(ds.Traces[t.Definition], *t)
		}
		ds.Reports = append(ds.Reports, r)
	}
	if err := sc.Err(); err != nil {
		ds.Reports = append(ds.Reports, FileReport{Path: path, Line: n + 1, Kind: kind, Err: err})
	}
}

// ValidateSolution checks a Solution's required fields and its entry
// point ({file}::{function}, the file among the sources, paths relative).
func ValidateSolution(s *Solution) []Problem {
	var ps problems
	for field, v := range map[string]string{"name": s.Name, "definition": s.Definition, "author": s.Author,
		"spec.language": s.Spec.Language, "spec.entry_point": s.Spec.EntryPoint} {
		if v == "" {
			ps.add(field, "required, must not be empty")
		}
	}
	if len(s.Spec.TargetHardware) == 0 {
		ps.add("spec.target_hardware", "required, at least one entry")
	}
	if len(s.Sources) == 0 {
		ps.add("sources", "required, at least one file")
	}
	file, fn, ok := strings.Cut(s.Spec.EntryPoint, "::")
	if s.Spec.EntryPoint != "" && (!ok || file == "" || fn == "" || strings.Contains(fn, "::")) {
		ps.addf("spec.entry_point", "%q is not {file_path}::{function_name}", s.Spec.EntryPoint)
	}
	found := false
	for i, src := range s.Sources {
		if src.Path == "" || strings.HasPrefix(src.Path, "/") || slices.Contains(strings.Split(src.Path, "/"), "..") {
			ps.addf(fmt.Sprintf("sources[%d].path", i), "%q must be a relative path without ..", src.Path)
		}
		found = found || src.Path == file
	}
	if ok && file != "" && !found {
		ps.addf("spec.entry_point", "the entry file %q is not among the sources", file)
	}
	slices.SortFunc(ps.list, func(a, b Problem) int { return strings.Compare(a.Field, b.Field) })
	return ps.list
}

// Layout paths of the dataset.
func DefinitionPath(d *Definition) string {
	return filepath.Join("definitions", d.OpType, d.Name+".json")
}

// WorkloadsPath is where a Definition's workload entries live.
func WorkloadsPath(d *Definition) string {
	return filepath.Join("workloads", d.OpType, d.Name+".jsonl")
}

// TracesPath is where an author's Traces of a Definition live.
func TracesPath(author string, d *Definition) string {
	return filepath.Join("traces", author, d.OpType, d.Name+".jsonl")
}

// SolutionPath is where a Solution lives.
func SolutionPath(s *Solution, opType string) string {
	return filepath.Join("solutions", s.Author, opType, s.Definition, s.Name+".json")
}

// WriteDefinitions writes the exported Definitions and their workload
// entries under root in the dataset layout and returns the paths written.
func WriteDefinitions(root string, defs []Exported) ([]string, error) {
	var written []string
	for _, e := range defs {
		data, err := e.Definition.Encode()
		if err != nil {
			return written, err
		}
		p := filepath.Join(root, DefinitionPath(e.Definition))
		if err := writeFile(p, data); err != nil {
			return written, err
		}
		written = append(written, p)
		var lines [][]byte
		for _, w := range e.Workloads {
			line, err := json.Marshal(Trace{Definition: e.Definition.Name, Workload: w})
			if err != nil {
				return written, err
			}
			lines = append(lines, line)
		}
		p = filepath.Join(root, WorkloadsPath(e.Definition))
		if err := writeFile(p, joinLines(lines)); err != nil {
			return written, err
		}
		written = append(written, p)
	}
	return written, nil
}

// WriteTraces writes Traces of one author (and their Solutions) under root
// in the dataset layout, replacing the author's trace files of those
// Definitions.
func WriteTraces(root, author string, defs map[string]*Definition, traces []Trace, sols []*Solution) ([]string, error) {
	byDef := map[string][][]byte{}
	var order []string
	for _, t := range traces {
		d := defs[t.Definition]
		if d == nil {
			return nil, fmt.Errorf("trace of unknown Definition %q", t.Definition)
		}
		line, err := json.Marshal(t)
		if err != nil {
			return nil, err
		}
		if _, ok := byDef[t.Definition]; !ok {
			order = append(order, t.Definition)
		}
		byDef[t.Definition] = append(byDef[t.Definition], line)
	}
	var written []string
	for _, name := range order {
		p := filepath.Join(root, TracesPath(author, defs[name]))
		if err := writeFile(p, joinLines(byDef[name])); err != nil {
			return written, err
		}
		written = append(written, p)
	}
	for _, s := range sols {
		d := defs[s.Definition]
		if d == nil {
			return written, fmt.Errorf("solution of unknown Definition %q", s.Definition)
		}
		data, err := encodeIndented(s)
		if err != nil {
			return written, err
		}
		p := filepath.Join(root, SolutionPath(s, d.OpType))
		if err := writeFile(p, data); err != nil {
			return written, err
		}
		written = append(written, p)
	}
	return written, nil
}

func joinLines(lines [][]byte) []byte {
	var b bytes.Buffer
	for _, l := range lines {
		b.Write(l)
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// writeFile writes data to p through a temporary file and a rename.
func writeFile(p string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(p), ".fib-*")
	if err != nil {
		return err
	}
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), p)
}
