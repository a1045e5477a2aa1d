//go:build unix

package flywheel

import (
	"os"
	"syscall"
)

// lockFile takes an exclusive advisory lock on f, blocking until it is free.
// flock locks belong to the open file description, so two opens in one
// process exclude each other just as two processes do.
func lockFile(f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if err != syscall.EINTR {
			return err
		}
	}
}

// unlockFile releases the lock taken by lockFile.
func unlockFile(f *os.File) error {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
}

// tryLockFile takes an exclusive advisory lock on f without waiting; it
// returns errLockHeld when another open file holds one.
func tryLockFile(f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		switch err {
		case syscall.EINTR:
			continue
		case syscall.EWOULDBLOCK:
			return errLockHeld
		}
		return err
	}
}
