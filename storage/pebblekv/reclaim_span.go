package pebblekv

import "github.com/cockroachdb/pebble/v2"

// ReclaimableBytesByRange is ReclaimableBytes for several key ranges that
// may share tables (a collection's documents, its indexes, its expiry
// index). Each table's deletion estimate is counted once and shared out
// among the ranges it overlaps by what its tombstones shadow there: the
// bytes each range holds in the tables of deeper levels (Pebble's
// approximate span bytes), or, with nothing below, by the table's own bytes
// in each range. Every range needs both bounds.
func (s *Store) ReclaimableBytesByRange(ranges [][2][]byte) ([]uint64, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	type table struct {
		level     int
		est, size float64
		span      []float64 // the table's bytes in each range
	}
	tables := map[uint64]*table{}
	for ri, r := range ranges {
		levels, err := s.db.SSTables(pebble.WithKeyRangeFilter(r[0], r[1]), pebble.WithApproximateSpanBytes())
		if err != nil {
			return nil, err
		}
		for lvl, level := range levels {
			for i := range level {
				t := &level[i]
				tb := tables[uint64(t.FileNum)]
				if tb == nil {
					est := float64(t.TableStats.PointDeletionsBytesEstimate + t.TableStats.RangeDeletionsBytesEstimate)
					tb = &table{level: lvl, est: est, size: float64(t.Size), span: make([]float64, len(ranges))}
					tables[uint64(t.FileNum)] = tb
				}
				tb.span[ri] = float64(t.ApproximateSpanBytes)
			}
		}
	}
	out := make([]float64, len(ranges))
	weights := make([]float64, len(ranges))
	for _, tb := range tables {
		if tb.est == 0 {
			continue
		}
		var sum float64
		for ri := range ranges {
			weights[ri] = 0
			if tb.span[ri] == 0 {
				continue // the table's tombstones are not in this range
			}
			for _, below := range tables {
				if below.level > tb.level {
					weights[ri] += below.span[ri]
				}
			}
			sum += weights[ri]
		}
		if sum == 0 {
			copy(weights, tb.span)
			for _, w := range weights {
				sum += w
			}
		}
		if sum == 0 {
			continue
		}
		for ri, w := range weights {
			out[ri] += tb.est * w / sum
		}
	}
	res := make([]uint64, len(ranges))
	for i, v := range out {
		res[i] = uint64(v)
	}
	return res, nil
}
