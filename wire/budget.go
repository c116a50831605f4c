package wire

import (
	"context"
	"sync"
)

// budget is a weighted semaphore over bytes: the request and reply bytes
// held in memory by all connections together. Waiters are served in
// arrival order, so a large request cannot be starved by a stream of small
// ones. Unlike a plain semaphore it can be overdrawn (force): a reply that
// already exists is counted even when it does not fit, and the overdraft
// makes the next requests wait until replies have drained. Requests that
// wait for budget stop reading from their sockets, which pushes back on
// the clients through TCP flow control.
type budget struct {
	mu      sync.Mutex
	size    int64
	used    int64
	waiters []*budgetWaiter
}

type budgetWaiter struct {
	n     int64
	ready chan struct{} // closed once the bytes have been granted
}

func newBudget(size int64) *budget { return &budget{size: size} }

// fits reports whether n more bytes fit; n is at most size, so a request
// as large as the whole budget is granted once nothing else is held.
// Zero-byte acquisitions wait only while the budget is overdrawn.
func (b *budget) fits(n int64) bool {
	return b.used+n <= b.size
}

// acquire waits until n bytes are available (n is clamped to the budget's
// size) or ctx ends.
func (b *budget) acquire(ctx context.Context, n int64) error {
	n = min(n, b.size)
	b.mu.Lock()
	// A zero-byte acquisition (a request that holds no budget of its
	// own) does not queue behind a large waiter: it only waits out an
	// overdraft.
	if (n == 0 || len(b.waiters) == 0) && b.fits(n) {
		b.used += n
		b.mu.Unlock()
		return nil
	}
	w := &budgetWaiter{n: n, ready: make(chan struct{})}
	b.waiters = append(b.waiters, w)
	b.mu.Unlock()
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
		b.mu.Lock()
		select {
		case <-w.ready:
			// Granted while giving up: hand the bytes back.
			b.used -= n
			b.grant()
		default:
			for i, x := range b.waiters {
				if x == w {
					b.waiters = append(b.waiters[:i], b.waiters[i+1:]...)
					break
				}
			}
			// The head may have been blocking others that now fit.
			b.grant()
		}
		b.mu.Unlock()
		return ctx.Err()
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
		w := b.waiters[0]
		if !b.fits(w.n) {
			break
		}
		b.used += w.n
		b.waiters[0] = nil
		b.waiters = b.waiters[1:]
		close(w.ready)
	}
	if len(b.waiters) == 0 || !b.fits(0) {
		return
	}
	kept := b.waiters[:0]
	for _, w := range b.waiters {
		if w.n == 0 {
			close(w.ready)
		} else {
			kept = append(kept, w)
		}
	}
	for i := len(kept); i < len(b.waiters); i++ {
		b.waiters[i] = nil
	}
	b.waiters = kept
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
