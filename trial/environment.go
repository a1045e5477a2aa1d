package trial

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"

	"github.com/amk-dev/amk/internal/version"
)

// Environment fingerprints where a verdict was produced: host, device (the
// launcher's name), the amk build, Go and OS. It is stamped on every
// verdict (Verdict.Environment) and, when nobody else identified the
// evaluator (an embedded run; a fleet worker sets its own richer
// fingerprint), on the outcome's Worker field, so that every trial record
// says what produced it.
func Environment(launcherName string) string {
	envOnce.Do(func() {
		host, err := os.Hostname()
		if err != nil || host == "" {
			host = "unknown"
		}
		envBase = fmt.Sprintf("build=%s go=%s os=%s/%s cpus=%d", version.String(), runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.NumCPU())
		envHost = host
	})
	return fmt.Sprintf("host=%s device=%s %s", envHost, strconv.Quote(launcherName), envBase)
}

var (
	envOnce          sync.Once
	envHost, envBase string
)
