package trial

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
)

// Environment fingerprints where a verdict was produced: host, device (the
// launcher's name), the amk build (build; "unknown" when empty), Go and OS. It is stamped on every
// verdict (Verdict.Environment) and, when nobody else identified the
// evaluator (an embedded run; a fleet worker sets its own richer
// fingerprint), on the outcome's Worker field, so that every trial record
// says what produced it.
func Environment(launcherName, build string) string {
	envOnce.Do(func() {
		host, err := os.Hostname()
		if err != nil || host == "" {
			host = "unknown"
		}
		envHost = host
	})
	if build == "" {
		build = "unknown"
	}
	return fmt.Sprintf("host=%s device=%s build=%s go=%s os=%s/%s cpus=%d", envHost, strconv.Quote(launcherName),
		build, runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.NumCPU())
}

var (
	envOnce sync.Once
	envHost string
)
