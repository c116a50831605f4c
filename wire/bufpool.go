package wire

import (
	"math/bits"
	"sync"
)

// Large buffers (frames and replies above the unbudgeted size) are
// recycled by size class, eight classes per doubling from 128 KiB to 64
// MiB (so at most 1/8 is wasted): a connection drops its large buffers
// after each message, so that idle connections hold none, and the next
// large message, on any connection, reuses one instead of allocating,
// zeroing and faulting in fresh memory. A pool holds no more than was in
// use at once, which the budget bounds, and the garbage collector empties
// it when it is not used.
const (
	minLargeShift = 17 // 128 KiB
	maxLargeShift = 26 // 64 MiB, above MaxMessageSize
	classSteps    = 8
)

var largePools [(maxLargeShift - minLargeShift + 1) * classSteps]sync.Pool

// largeClass is the class of n bytes (128 KiB < n <= 64 MiB) and its size.
func largeClass(n int) (class, size int) {
	e := max(minLargeShift, bits.Len(uint(n-1))) // n <= 1<<e
	g := 1 << (e - 4)                            // sizes are 9..16 steps of g
	steps := max(9, (n+g-1)/g)
	return (e-minLargeShift)*classSteps + steps - 9, steps * g
}

// largeSize is the capacity getLarge(n) returns.
func largeSize(n int) int {
	_, size := largeClass(n)
	return size
}

// getLarge returns an empty buffer with a capacity of at least n
// (n <= 64 MiB), rounded up to its class.
func getLarge(n int) []byte {
	c, size := largeClass(n)
	if b, ok := largePools[c].Get().(*[]byte); ok {
		return (*b)[:0]
	}
	return make([]byte, 0, size)
}

// putLarge recycles a buffer that getLarge returned; others are left to
// the garbage collector.
func putLarge(b []byte) {
	n := cap(b)
	if n <= 1<<minLargeShift>>1 || n > 1<<maxLargeShift {
		return
	}
	if c, size := largeClass(n); size == n {
		b = b[:0]
		largePools[c].Put(&b)
	}
}
