package hostmem

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Files are the kernel files a Reader consults; tests point them at
// fixtures. A missing file is skipped (no cgroup limit, say).
type Files struct {
	Meminfo string // /proc/meminfo
	// CgroupMax and CgroupCurrent are the limit and usage of the process's
	// memory cgroup (v2: memory.max, memory.current; v1:
	// memory.limit_in_bytes, memory.usage_in_bytes).
	CgroupMax     string
	CgroupCurrent string
	// Statm is /proc/self/statm (resident size of this process).
	Statm string
}

// Reader answers how much memory the process has.
type Reader struct {
	Files Files
	// Ceiling, when positive, caps this process's memory (bytes) whatever
	// the host has: the worker's max_memory setting.
	Ceiling int64
}

// System is a Reader of this machine's files (cgroup v2 when present,
// else v1).
func System(ceiling int64) Reader {
	f := Files{Meminfo: "/proc/meminfo", Statm: "/proc/self/statm",
		CgroupMax: "/sys/fs/cgroup/memory.max", CgroupCurrent: "/sys/fs/cgroup/memory.current"}
	if _, err := os.Stat(f.CgroupMax); err != nil {
		f.CgroupMax = "/sys/fs/cgroup/memory/memory.limit_in_bytes"
		f.CgroupCurrent = "/sys/fs/cgroup/memory/memory.usage_in_bytes"
	}
	return Reader{Files: f, Ceiling: ceiling}
}

// maxFileBytes bounds what is read from any of the files.
const maxFileBytes = 64 << 10

// Capacity is the most memory the process could ever have: the smallest of
// the host's MemTotal, the cgroup limit and the ceiling; source names which.
func (r Reader) Capacity() (bytes int64, source string, err error) {
	mi, err := r.meminfo()
	if err != nil {
		return 0, "", err
	}
	bytes, source = mi.Total, "MemTotal"
	if limit, ok := r.cgroupValue(r.Files.CgroupMax); ok && limit < bytes {
		bytes, source = limit, "cgroup limit"
	}
	if r.Ceiling > 0 && r.Ceiling < bytes {
		bytes, source = r.Ceiling, "max_memory"
	}
	return bytes, source, nil
}

// Available is how much more memory the process may take now: the
// smallest of the host's MemAvailable, the cgroup's limit minus its usage,
// and the ceiling minus this process's resident size.
func (r Reader) Available() (bytes int64, source string, err error) {
	mi, err := r.meminfo()
	if err != nil {
		return 0, "", err
	}
	bytes, source = mi.Available, "MemAvailable"
	if limit, ok := r.cgroupValue(r.Files.CgroupMax); ok {
		used, _ := r.cgroupValue(r.Files.CgroupCurrent)
		if free := max(limit-used, 0); free < bytes {
			bytes, source = free, "cgroup limit minus usage"
		}
	}
	if r.Ceiling > 0 {
		rss, _ := r.Resident()
		if free := max(r.Ceiling-rss, 0); free < bytes {
			bytes, source = free, "max_memory minus resident"
		}
	}
	return bytes, source, nil
}

// Meminfo is the part of /proc/meminfo amk reads, in bytes.
type Meminfo struct {
	Total     int64
	Available int64
}

func (r Reader) meminfo() (Meminfo, error) {
	b, err := readBounded(r.Files.Meminfo)
	if err != nil {
		return Meminfo{}, err
	}
	return ParseMeminfo(b)
}

// ParseMeminfo reads MemTotal and MemAvailable (kB) from /proc/meminfo
// text. Both must be present.
func ParseMeminfo(b []byte) (Meminfo, error) {
	var m Meminfo
	seen := 0
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		key, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok || (key != "MemTotal" && key != "MemAvailable") {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) != 2 || fields[1] != "kB" {
			return m, fmt.Errorf("meminfo: %s: %q is not \"<n> kB\"", key, strings.TrimSpace(rest))
		}
		kb, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil || kb < 0 || kb > 1<<50 {
			return m, fmt.Errorf("meminfo: %s: %q is not a size in kB", key, fields[0])
		}
		if key == "MemTotal" {
			m.Total = kb << 10
		} else {
			m.Available = kb << 10
		}
		seen++
	}
	if seen < 2 || m.Total == 0 {
		return m, errors.New("meminfo: MemTotal or MemAvailable missing")
	}
	return m, nil
}

// ParseCgroupValue reads a cgroup memory file: a byte count, or "max" (no
// limit, ok=false). v1's "no limit" is a huge number, also ok=false.
func ParseCgroupValue(b []byte) (value int64, ok bool) {
	s := strings.TrimSpace(string(b))
	if s == "" || s == "max" {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n >= 1<<60 {
		return 0, false
	}
	return n, true
}

func (r Reader) cgroupValue(path string) (int64, bool) {
	if path == "" {
		return 0, false
	}
	b, err := readBounded(path)
	if err != nil {
		return 0, false
	}
	return ParseCgroupValue(b)
}

// Resident is this process's resident set size in bytes.
func (r Reader) Resident() (int64, error) {
	b, err := readBounded(r.Files.Statm)
	if err != nil {
		return 0, err
	}
	fields := strings.Fields(string(b))
	if len(fields) < 2 {
		return 0, errors.New("statm: too few fields")
	}
	pages, err := strconv.ParseInt(fields[1], 10, 64)
	if err != nil || pages < 0 {
		return 0, fmt.Errorf("statm: resident %q", fields[1])
	}
	return pages * int64(os.Getpagesize()), nil
}

func readBounded(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, maxFileBytes)
	n, err := f.Read(b)
	if n == 0 && err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return b[:n], nil
}
