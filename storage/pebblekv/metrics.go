package pebblekv

// Metrics are the Pebble figures the metrics endpoint exports.
type Metrics struct {
	BlockCacheHits, BlockCacheMisses int64
	BlockCacheSizeBytes              int64
	BlockCacheCapacityBytes          int64 // the configured limit (Options.CacheSize)
	Compactions                      int64
	Flushes                          int64
	ReadAmplification                int
	DiskUsageBytes                   uint64
	LiveTablesBytes                  uint64
	MemtableSizeBytes                uint64
	L0Files                          int64
}

// Metrics reads Pebble's metrics. ok is false once the store is closed.
func (s *Store) Metrics() (m Metrics, ok bool) {
	s.mu.Lock() // not while Close runs: Pebble panics on a closed DB
	defer s.mu.Unlock()
	if s.closed.Load() {
		return Metrics{}, false
	}
	pm := s.db.Metrics()
	total := pm.Total()
	return Metrics{
		BlockCacheHits:          pm.BlockCache.Hits,
		BlockCacheMisses:        pm.BlockCache.Misses,
		BlockCacheSizeBytes:     pm.BlockCache.Size,
		BlockCacheCapacityBytes: s.cacheCapacity,
		Compactions:             pm.Compact.Count,
		Flushes:                 pm.Flush.Count,
		ReadAmplification:       pm.ReadAmp(),
		DiskUsageBytes:          pm.DiskSpaceUsage(),
		LiveTablesBytes:         uint64(total.TablesSize),
		MemtableSizeBytes:       pm.MemTable.Size,
		L0Files:                 pm.Levels[0].TablesCount,
	}, true
}

// IsOpen reports whether the store is open.
func (s *Store) IsOpen() bool { return !s.closed.Load() }
