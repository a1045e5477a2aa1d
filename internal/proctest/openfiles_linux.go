package proctest

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// FilesOpenForWriting lists the files under dir that process pid holds open
// for writing (write-only or read-write), from /proc/<pid>/fd and the
// access mode in /proc/<pid>/fdinfo. A descriptor closed while it is looked
// at is left out.
func FilesOpenForWriting(pid int, dir string) ([]string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	fdDir := fmt.Sprintf("/proc/%d/fd", pid)
	fds, err := os.ReadDir(fdDir)
	if err != nil {
		return nil, err
	}
	var writable []string
	for _, fd := range fds {
		target, err := os.Readlink(filepath.Join(fdDir, fd.Name()))
		if err != nil || (target != dir && !strings.HasPrefix(target, dir+string(filepath.Separator))) {
			continue
		}
		info, err := os.ReadFile(fmt.Sprintf("/proc/%d/fdinfo/%s", pid, fd.Name()))
		if err != nil {
			continue
		}
		flags, ok := fdFlags(info)
		if !ok {
			return nil, fmt.Errorf("/proc/%d/fdinfo/%s: no flags line", pid, fd.Name())
		}
		if flags&(os.O_WRONLY|os.O_RDWR) != 0 {
			writable = append(writable, target)
		}
	}
	return writable, nil
}

// fdFlags reads the "flags:" line (octal open flags) of an fdinfo file.
func fdFlags(info []byte) (int, bool) {
	sc := bufio.NewScanner(bytes.NewReader(info))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "flags:"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 8, 64)
			return int(n), err == nil
		}
	}
	return 0, false
}
