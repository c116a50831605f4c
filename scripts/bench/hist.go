package main

import (
	"math"
	"math/bits"
	"time"
)

// hist is a log-linear latency histogram: values in nanoseconds are bucketed
// by their highest set bit and the next subBits bits, so every bucket is at
// most 1/2^subBits (≈1.6 %) wide relative to its value. Fixed size, no
// allocation per sample, mergeable across workers.
type hist struct {
	counts [64 << subBits]uint32
	n      int64
	sum    int64
	max    int64
}

const subBits = 6

func bucketOf(v int64) int {
	if v < 1<<subBits {
		return int(v)
	}
	hb := bits.Len64(uint64(v)) - 1 // ≥ subBits
	shift := hb - subBits
	sub := int(uint64(v)>>shift) & (1<<subBits - 1)
	return (shift+1)<<subBits | sub
}

// bucketValue is the midpoint of bucket b's range.
func bucketValue(b int) float64 {
	if b < 1<<subBits {
		return float64(b)
	}
	shift := b>>subBits - 1
	sub := b & (1<<subBits - 1)
	lo := float64(uint64(1<<subBits|sub) << shift)
	return lo + float64(uint64(1)<<shift)/2
}

func (h *hist) record(d time.Duration) {
	v := int64(d)
	if v < 0 {
		v = 0
	}
	h.counts[bucketOf(v)]++
	h.n++
	h.sum += v
	if v > h.max {
		h.max = v
	}
}

func (h *hist) merge(o *hist) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.sum += o.sum
	if o.max > h.max {
		h.max = o.max
	}
}

// quantile returns the q-quantile (0 < q ≤ 1) as a duration.
func (h *hist) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := int64(math.Ceil(q * float64(h.n)))
	if rank < 1 {
		rank = 1
	}
	var seen int64
	for b, c := range h.counts {
		seen += int64(c)
		if seen >= rank {
			v := bucketValue(b)
			if v > float64(h.max) {
				v = float64(h.max)
			}
			return time.Duration(v)
		}
	}
	return time.Duration(h.max)
}
