package mpk_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/amk-dev/amk/ir/mpk"
)

// FuzzDecode: any input decodes or fails cleanly; what decodes re-encodes to
// a fixed point, checks and translates without a panic.
func FuzzDecode(f *testing.F) {
	for _, name := range []string{"hand_seed.json", "hand_mirage.json"} {
		data, err := os.ReadFile(filepath.Join("testdata", "good", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{"all_tasks": [], "all_events": [], "first_tasks": []}`))
	f.Add([]byte(`{"all_tasks": [{"task_type": 1}], "all_events": [{"event_type": 901}], "first_tasks": [0], "amk": {}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		g, err := mpk.Decode(data)
		if err != nil {
			return
		}
		enc := mpk.Encode(g)
		g2, err := mpk.Decode(enc)
		if err != nil {
			t.Fatalf("re-decoding the encoding failed: %v\n%s", err, enc)
		}
		if string(mpk.Encode(g2)) != string(enc) {
			t.Fatal("encoding is not a fixed point")
		}
		if len(g.Tasks)+len(g.Events) > 300 {
			return // keep each run short; big graphs are covered by the tests
		}
		_ = mpk.Check(g, mpk.CheckOptions{Workers: 4, QueueLen: 64})
		if p, err := mpk.ToProgram(g); err == nil {
			_, _ = mpk.ToGraph(p, mpk.ExportOptions{})
		}
	})
}
