package server

import (
	"fmt"

	"github.com/mayflydb/mayfly/storage/pebblekv"
)

// diskGuard turns Config's disk-space settings into the store's guard
// options; nil for an in-memory server without a DiskStat.
func diskGuard(cfg Config) (*pebblekv.DiskGuardOptions, error) {
	if cfg.InMemory && cfg.DiskStat == nil {
		return nil, nil
	}
	g := pebblekv.DefaultDiskGuard()
	g.Stat = cfg.DiskStat
	if cfg.MinFreeDisk != "" {
		v, err := pebblekv.ParseDiskSize(cfg.MinFreeDisk)
		if err != nil {
			return nil, fmt.Errorf("minFreeDisk: %w", err)
		}
		g.MinFree = v
	}
	if cfg.BallastSize != "" {
		v, err := pebblekv.ParseDiskSize(cfg.BallastSize)
		if err != nil {
			return nil, fmt.Errorf("ballastSize: %w", err)
		}
		g.Ballast, g.BallastCapPercent = v, 0
	}
	if cfg.InMemory {
		g.Ballast, g.BallastCapPercent = pebblekv.DiskSize{}, 0
	}
	return g, nil
}
