//go:build unix

package wire

import "syscall"

// supportedMaxConns is 80% of the open-file limit, which mongod takes as
// the most connections it can serve; 0 if the limit is unknown.
func supportedMaxConns() int {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0
	}
	// An unlimited (or huge) limit leaves --maxConns as given.
	return int(min(float64(lim.Cur)*0.8, float64(1<<31-1)))
}
