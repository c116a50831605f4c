package wire

import "testing"

func TestIssue21LargeClasses(t *testing.T) {
	prev := -1
	for _, n := range []int{64<<10 + 1, 128 << 10, 128<<10 + 1, 1 << 20, 1<<20 + 1, 40 << 20, MaxMessageSize, 64 << 20} {
		c, size := largeClass(n)
		if size < n || size > n+n/8+(16<<10) || c < prev || c >= len(largePools) {
			t.Errorf("largeClass(%d) = %d, %d", n, c, size)
		}
		prev = c
		b := getLarge(n)
		if cap(b) != size || len(b) != 0 {
			t.Errorf("getLarge(%d): cap %d", n, cap(b))
		}
		putLarge(b)
	}
}
