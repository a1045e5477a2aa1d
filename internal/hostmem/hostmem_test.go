package hostmem

import (
	"os"
	"path/filepath"
	"testing"
)

const meminfo = `MemTotal:       24000000 kB
MemFree:         1000000 kB
MemAvailable:    8000000 kB
Buffers:          100000 kB
`

func write(t *testing.T, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCapacityAndAvailableTakeTheSmallestLimit(t *testing.T) {
	dir := t.TempDir()
	files := Files{Meminfo: write(t, dir, "meminfo", meminfo), Statm: write(t, dir, "statm", "1000 256 0 0 0 0 0\n"),
		CgroupMax: filepath.Join(dir, "none"), CgroupCurrent: filepath.Join(dir, "none")}
	r := Reader{Files: files}
	if c, src, err := r.Capacity(); err != nil || c != 24000000<<10 || src != "MemTotal" {
		t.Fatalf("host only: capacity %d %q %v", c, src, err)
	}
	if a, src, err := r.Available(); err != nil || a != 8000000<<10 || src != "MemAvailable" {
		t.Fatalf("host only: available %d %q %v", a, src, err)
	}
	r.Files.CgroupMax = write(t, dir, "max", "4294967296\n")
	r.Files.CgroupCurrent = write(t, dir, "cur", "1073741824\n")
	if c, src, _ := r.Capacity(); c != 4<<30 || src != "cgroup limit" {
		t.Fatalf("cgroup: capacity %d %q", c, src)
	}
	if a, src, _ := r.Available(); a != 3<<30 || src != "cgroup limit minus usage" {
		t.Fatalf("cgroup: available %d %q", a, src)
	}
	r.Ceiling = 1 << 30
	resident := int64(256 * os.Getpagesize())
	if c, src, _ := r.Capacity(); c != 1<<30 || src != "max_memory" {
		t.Fatalf("ceiling: capacity %d %q", c, src)
	}
	if a, src, _ := r.Available(); a != 1<<30-resident || src != "max_memory minus resident" {
		t.Fatalf("ceiling: available %d %q, want %d", a, src, 1<<30-resident)
	}
	r.Files.CgroupMax = write(t, dir, "max", "max\n")
	r.Ceiling = 0
	if c, _, _ := r.Capacity(); c != 24000000<<10 {
		t.Fatalf("cgroup max: capacity %d", c)
	}
}

func TestParseMeminfoRejectsGarbage(t *testing.T) {
	for _, bad := range []string{"", "MemTotal: 1 kB\n", "MemTotal: x kB\nMemAvailable: 1 kB\n", "MemTotal: 1 MB\nMemAvailable: 1 kB\n", "MemTotal: -5 kB\nMemAvailable: 1 kB\n"} {
		if _, err := ParseMeminfo([]byte(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestSystemReadsThisMachine(t *testing.T) {
	c, _, err := System(0).Capacity()
	if err != nil || c <= 0 {
		t.Fatalf("capacity %d: %v", c, err)
	}
	a, _, err := System(0).Available()
	if err != nil || a <= 0 || a > c {
		t.Fatalf("available %d of %d: %v", a, c, err)
	}
}

func FuzzParseMeminfo(f *testing.F) {
	f.Add([]byte(meminfo))
	f.Add([]byte("MemTotal: 1 kB\nMemAvailable: 99999999999999999999 kB\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseMeminfo(b)
		if err == nil && (m.Total <= 0 || m.Available < 0) {
			t.Fatalf("accepted %+v", m)
		}
		ParseCgroupValue(b)
	})
}
