package model

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// parallelFor is parallelForN on GOMAXPROCS workers.
func parallelFor(n int, fn func(i int)) { parallelForN(runtime.GOMAXPROCS(0), n, fn) }

// parallelForN calls fn(i) for every i in [0, n) on up to workers
// goroutines, handing out indices in order. fn must only write state owned by
// index i, so the result never depends on the number of workers.
func parallelForN(workers, n int, fn func(i int)) {
	workers = min(workers, n)
	if workers <= 1 {
		for i := range n {
			fn(i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	wg.Add(workers)
	for range workers {
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				fn(i)
			}
		}()
	}
	wg.Wait()
}
