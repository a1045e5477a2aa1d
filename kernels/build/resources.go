package build

import (
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// Resources is what ptxas reported for one kernel of a module (nvcc
// --resource-usage, which every cubin build passes).
type Resources struct {
	Kernel          string
	Registers       int
	StackBytes      int // stack frame per thread (local arrays and spills)
	SpillStoreBytes int
	SpillLoadBytes  int
}

// Spills reports whether the kernel spilled registers to local memory.
func (r Resources) Spills() bool { return r.SpillStoreBytes > 0 || r.SpillLoadBytes > 0 }

// The patterns of ParseResources, compiled on first use: their bounded
// repetitions ({1,512}) make large programs, and compiling them at package
// init cost every amkctl command (amkctl validate included) about half a
// millisecond and 3,400 allocations.
var (
	reEntry      = lazyRegexp(`Compiling entry function '([^']{1,512})'`)
	reProperties = lazyRegexp(`Function properties for ([^\s]{1,512})`)
	reFrame      = lazyRegexp(`(\d{1,9}) bytes stack frame, (\d{1,9}) bytes spill stores, (\d{1,9}) bytes spill loads`)
	reUsed       = lazyRegexp(`Used (\d{1,9}) registers`)
)

// lazyRegexp returns expr's regexp, compiled the first time it is asked for.
func lazyRegexp(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}

// ParseResources reads the per-kernel resource lines of an nvcc/ptxas log
// ("Compiling entry function 'k'", "Function properties for k", "N bytes
// stack frame, N bytes spill stores, N bytes spill loads", "Used N
// registers"), one Resources per kernel in the order ptxas named them.
// Lines it does not know are ignored.
func ParseResources(log string) []Resources {
	var out []Resources
	index := map[string]int{}
	cur := -1
	at := func(name string) int {
		i, ok := index[name]
		if !ok {
			i = len(out)
			index[name] = i
			out = append(out, Resources{Kernel: name})
		}
		return i
	}
	for line := range strings.SplitSeq(log, "\n") {
		if m := reEntry().FindStringSubmatch(line); m != nil {
			cur = at(m[1])
			continue
		}
		if m := reProperties().FindStringSubmatch(line); m != nil {
			cur = at(m[1])
			continue
		}
		if cur < 0 {
			continue
		}
		if m := reFrame().FindStringSubmatch(line); m != nil {
			out[cur].StackBytes, _ = strconv.Atoi(m[1])
			out[cur].SpillStoreBytes, _ = strconv.Atoi(m[2])
			out[cur].SpillLoadBytes, _ = strconv.Atoi(m[3])
		} else if m := reUsed().FindStringSubmatch(line); m != nil {
			out[cur].Registers, _ = strconv.Atoi(m[1])
		}
	}
	return out
}
