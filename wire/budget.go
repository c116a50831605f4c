package wire

import (
	"context"
	"sync"
	"time"
)

// budget is a weighted semaphore over bytes: the request and reply bytes
// held in memory by all connections together. Waiters are served in
// arrival order, so a large request cannot be starved by a stream of small
// ones. Unlike a plain semaphore it can be overdrawn (force): a reply that
// already exists is counted even when it does not fit, and the overdraft
// makes the next requests wait until replies have drained. Requests that
// wait for budget stop reading from their sockets, which pushes back on
// the clients through TCP flow control.
//
// A frame's buffer is charged as it grows, so a waiter may already hold
// bytes. When everything in use is held by waiters, none could ever
// release it: the first waiter is then granted over the budget, so that
// waits always end.
type budget struct {
	mu          sync.Mutex
	size        int64
	used        int64
	waitersHeld int64 // bytes held by the connections now waiting
	waiters     []*budgetWaiter
	// onPressure is called now and then while requests wait, to free
	// what stalled connections hold.
	onPressure func()
}

type budgetWaiter struct {
	n, holding int64
	low        bool          // served only when no other waiter is waiting
	ready      chan struct{} // closed once the bytes have been granted
}

// pressureEvery is how often a waiter calls onPressure.
const pressureEvery = 200 * time.Millisecond

func newBudget(size int64) *budget { return &budget{size: size} }

// fits reports whether n more bytes fit. Zero-byte acquisitions wait only
// while the budget is overdrawn.
func (b *budget) fits(n int64) bool {
	return b.used+n <= b.size
}

// tryAcquire takes n bytes if they are available without waiting.
func (b *budget) tryAcquire(n int64, low bool) bool {
	n = min(n, b.size)
	b.mu.Lock()
	defer b.mu.Unlock()
	if (n == 0 || len(b.waiters) == 0 || !low && b.head() < 0) && b.fits(n) {
		b.used += n
		return true
	}
	return false
}

// acquire waits until n bytes are available (n is clamped to the budget's
// size) or ctx ends. holding is what the caller already holds. A low
// acquisition is served after every other waiter.
func (b *budget) acquire(ctx context.Context, n, holding int64, low bool) error {
	n = min(n, b.size)
	b.mu.Lock()
	// A zero-byte acquisition (a request that needs no more budget) does
	// not queue behind a large waiter: it only waits out an overdraft.
	if (n == 0 || len(b.waiters) == 0 || !low && b.head() < 0) && b.fits(n) {
		b.used += n
		b.mu.Unlock()
		return nil
	}
	w := &budgetWaiter{n: n, holding: holding, low: low, ready: make(chan struct{})}
	b.waiters = append(b.waiters, w)
	b.waitersHeld += holding
	b.grant() // this waiter may be what makes the others stuck
	b.mu.Unlock()
	tick := time.NewTicker(pressureEvery)
	defer tick.Stop()
	for {
		select {
		case <-w.ready:
			return nil
		case <-tick.C:
			if b.onPressure != nil {
				b.onPressure()
			}
		case <-ctx.Done():
			b.mu.Lock()
			select {
			case <-w.ready:
				// Granted while giving up: hand the bytes back.
				b.used -= n
			default:
				for i, x := range b.waiters {
					if x == w {
						b.waiters = append(b.waiters[:i], b.waiters[i+1:]...)
						break
					}
				}
				b.waitersHeld -= holding
			}
			b.grant()
			b.mu.Unlock()
			return ctx.Err()
		}
	}
}

// force counts n bytes at once, over the budget if need be.
func (b *budget) force(n int64) {
	b.mu.Lock()
	b.used += n
	b.mu.Unlock()
}

// release returns n bytes and wakes the waiters that now fit.
func (b *budget) release(n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	b.used -= n
	b.grant()
	b.mu.Unlock()
}

// grant wakes waiters in order while they fit, and every zero-byte
// waiter once the budget is no longer overdrawn; b.mu is held.
func (b *budget) grant() {
	for len(b.waiters) > 0 {
		i := b.head()
		if i < 0 {
			i = 0 // only low waiters: the first of them
		}
		w := b.waiters[i]
		// Everything in use is held by waiters: nothing will be released
		// until one of them goes on, so the first one does.
		stuck := b.used <= b.waitersHeld
		if !b.fits(w.n) && !stuck {
			break
		}
		b.wake(w)
		b.waiters = append(b.waiters[:i], b.waiters[i+1:]...)
	}
	if len(b.waiters) == 0 || !b.fits(0) {
		return
	}
	kept := b.waiters[:0]
	for _, w := range b.waiters {
		if w.n == 0 {
			b.wake(w)
		} else {
			kept = append(kept, w)
		}
	}
	for i := len(kept); i < len(b.waiters); i++ {
		b.waiters[i] = nil
	}
	b.waiters = kept
}

// head is the index of the first waiter that is not low, or -1.
func (b *budget) head() int {
	for i, w := range b.waiters {
		if !w.low {
			return i
		}
	}
	return -1
}

func (b *budget) wake(w *budgetWaiter) {
	b.used += w.n
	b.waitersHeld -= w.holding
	close(w.ready)
}

// inUse is the number of bytes currently counted.
func (b *budget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// waiting is the number of acquisitions waiting.
func (b *budget) waiting() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.waiters)
}
