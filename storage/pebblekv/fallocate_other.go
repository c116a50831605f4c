//go:build !linux

package pebblekv

import "errors"

// fallocate is Linux-only; elsewhere the ballast is written as zeros.
func fallocate(uintptr, int64) error { return errors.ErrUnsupported }
