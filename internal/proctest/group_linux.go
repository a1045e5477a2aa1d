package proctest

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

func setDeathSignal(attr *syscall.SysProcAttr) { attr.Pdeathsig = syscall.SIGKILL }

// liveMembers counts the processes of group pgid that are not zombies, from
// /proc/<pid>/stat: "pid (comm) state ppid pgrp ...", where comm may itself
// hold spaces and parentheses, so the fields are read after its last ')'.
func liveMembers(pgid int) (int, error) {
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		return 0, err
	}
	want := strconv.Itoa(pgid)
	alive := 0
	for _, path := range stats {
		b, err := os.ReadFile(path)
		if err != nil {
			continue // the process ended while we looked
		}
		end := bytes.LastIndexByte(b, ')')
		if end < 0 {
			return 0, fmt.Errorf("proctest: unexpected %s: %q", path, b)
		}
		fields := bytes.Fields(b[end+1:])
		if len(fields) < 3 {
			return 0, fmt.Errorf("proctest: unexpected %s: %q", path, b)
		}
		state, pgrp := string(fields[0]), string(fields[2])
		if pgrp == want && state != "Z" && state != "X" {
			alive++
		}
	}
	return alive, nil
}
