package vm

import (
	"errors"
	"testing"
)

func TestClosedDoneCancelsARun(t *testing.T) {
	for _, workers := range []int{1, 4} {
		done := make(chan struct{})
		close(done)
		v := loadToy(t, toySmall, 0, Options{Workers: workers, Done: done})
		bindStep(t, v, 1, 0)
		if _, err := v.Run(); !errors.Is(err, ErrCancelled) {
			t.Fatalf("workers=%d: err = %v, want ErrCancelled", workers, err)
		}
	}
}
