package pebblekv

import "syscall"

// fallocate extends the file to size bytes with real blocks behind them.
func fallocate(fd uintptr, size int64) error {
	return syscall.Fallocate(int(fd), 0, 0, size)
}
