package main

import (
	"math"
	"math/rand/v2"
	"strconv"
)

// Key choice follows YCSB: records are "user<N>" for N in [0, records).
//
// zipfian draws item numbers in [0, n) with the skew YCSB uses (θ = 0.99),
// by the constant-time method of Gray et al., "Quickly Generating
// Billion-Record Synthetic Databases" (SIGMOD 1994). scrambled spreads the
// popular items over the key space with a hash, as YCSB's
// ScrambledZipfianGenerator does, so that the hot keys are not neighbours.
type zipfian struct {
	n                 int64
	theta, alpha, eta float64
	zetan, half       float64
}

const zipfTheta = 0.99

func zeta(n int64, theta float64) float64 {
	var s float64
	for i := int64(1); i <= n; i++ {
		s += 1 / math.Pow(float64(i), theta)
	}
	return s
}

func newZipfian(n int64) *zipfian {
	if n < 2 {
		n = 2
	}
	z := &zipfian{n: n, theta: zipfTheta}
	z.zetan = zeta(n, z.theta)
	zeta2 := zeta(2, z.theta)
	z.alpha = 1 / (1 - z.theta)
	z.eta = (1 - math.Pow(2/float64(n), 1-z.theta)) / (1 - zeta2/z.zetan)
	z.half = 1 + math.Pow(0.5, z.theta)
	return z
}

// next returns a rank: 0 is the most popular item.
func (z *zipfian) next(r *rand.Rand) int64 {
	u := r.Float64()
	uz := u * z.zetan
	if uz < 1 {
		return 0
	}
	if uz < z.half {
		return 1
	}
	v := int64(float64(z.n) * math.Pow(z.eta*u-z.eta+1, z.alpha))
	if v >= z.n {
		v = z.n - 1
	}
	return v
}

// scrambled maps a rank to an item in [0, n) by FNV-1a of the rank.
func (z *zipfian) scrambled(r *rand.Rand) int64 {
	return int64(fnv64(uint64(z.next(r))) % uint64(z.n))
}

func fnv64(v uint64) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < 8; i++ {
		h ^= v & 0xff
		h *= 1099511628211
		v >>= 8
	}
	return h
}

func userKey(n int64) string { return "user" + strconv.FormatInt(n, 10) }

// letters fills b with random lowercase letters.
func letters(r *rand.Rand, b []byte) {
	for i := 0; i < len(b); {
		v := r.Uint64()
		for j := 0; j < 8 && i < len(b); j++ {
			b[i] = 'a' + byte(v&0xff)%26
			v >>= 8
			i++
		}
	}
}

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 1)) }
