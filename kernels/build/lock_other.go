//go:build !unix

package build

import (
	"context"
	"errors"
	"os"
	"time"
)

// staleLock is how old a lock file must be before another builder breaks it
// (a builder that crashed without flock support leaves its file behind).
const staleLock = 30 * time.Minute

// lockFile creates path exclusively, polling so that ctx can cancel the wait.
func lockFile(ctx context.Context, path string) (unlock func(), err error) {
	for {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err == nil {
			f.Close()
			return func() { os.Remove(path) }, nil
		}
		if !errors.Is(err, os.ErrExist) {
			return nil, err
		}
		if st, serr := os.Stat(path); serr == nil && time.Since(st.ModTime()) > staleLock {
			os.Remove(path)
			continue
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}
