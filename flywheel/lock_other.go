//go:build !unix

package flywheel

import (
	"errors"
	"os"
)

// lockFile is not implemented off unix: appends refuse to run unlocked.
func lockFile(*os.File) error { return errors.ErrUnsupported }

func unlockFile(*os.File) error { return nil }

// tryLockFile is not implemented off unix: nothing is locked unlocked.
func tryLockFile(*os.File) error { return errors.ErrUnsupported }
