package engine

import (
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// top is mongod's per-collection usage table (src/mongo/db/stats/top.cpp),
// what mongotop reads: for each namespace, the time spent and the number
// of operations in total, under read or write locks, and per kind (find
// queries, getMore, insert, update, remove, other commands). Fed from
// Handle for every command that names a collection; times are in
// microseconds. Entries of collections that no longer exist are dropped
// when top is next read (mongod removes them on drop).

// Top kinds, in the order of the reply.
const (
	topTotal = iota
	topReadLock
	topWriteLock
	topQueries
	topGetMore
	topInsert
	topUpdate
	topRemove
	topCommands
	topKinds
)

var topNames = [topKinds]string{"total", "readLock", "writeLock", "queries", "getmore", "insert", "update", "remove", "commands"}

type topCounter struct{ timeUS, count atomic.Int64 }

type topEntry [topKinds]topCounter

// topTable maps "<db>.<coll>" to its counters. The zero value is ready.
type topTable struct{ m sync.Map }

func init() {
	Register(&Command{Name: "top", Help: "usage by collection, in micro-seconds", AdminOnly: true, Run: cmdTop})
}

// recordTop accounts one command (Handle calls it after dispatch).
func (e *Engine) recordTop(r *Request, took time.Duration) {
	if r.DB == "" || len(r.Cmd) == 0 {
		return
	}
	name := strings.ToLower(r.Name)
	kind, write := topKindOf(name)
	if kind < 0 {
		return
	}
	ns := opNamespace(r.DB, r.Cmd)
	if strings.Contains(ns, ".$cmd") {
		return
	}
	v, ok := e.top.m.Load(ns)
	if !ok {
		v, _ = e.top.m.LoadOrStore(ns, &topEntry{})
	}
	ent := v.(*topEntry)
	us := took.Microseconds()
	lock := topReadLock
	if write {
		lock = topWriteLock
	}
	for _, k := range [3]int{topTotal, lock, kind} {
		ent[k].timeUS.Add(us)
		ent[k].count.Add(1)
	}
}

// topKindOf says how a command counts in top and whether it takes a write
// lock; -1 for commands top does not account.
func topKindOf(name string) (kind int, write bool) {
	switch name {
	case "find":
		return topQueries, false
	case "getmore":
		return topGetMore, false
	case "insert":
		return topInsert, true
	case "update":
		return topUpdate, true
	case "delete":
		return topRemove, true
	case "aggregate", "count", "distinct", "listindexes", "collstats", "validate":
		return topCommands, false
	case "findandmodify", "create", "drop", "createindexes", "dropindexes", "collmod":
		return topCommands, true
	}
	return -1, false
}

func cmdTop(e *Engine, r *Request) (bson.D, error) {
	var names []string
	entries := map[string]*topEntry{}
	e.top.m.Range(func(k, v any) bool {
		ns := k.(string)
		db, coll, _ := strings.Cut(ns, ".")
		if e.cat.Get(db, coll) == nil {
			// Dropped (or never created): forget it, as mongod does on drop.
			e.top.m.Delete(k)
			return true
		}
		names = append(names, ns)
		entries[ns] = v.(*topEntry)
		return true
	})
	sort.Strings(names)
	totals := bson.D{{Key: "note", Value: "all times in microseconds"}}
	for _, ns := range names {
		ent := entries[ns]
		d := make(bson.D, 0, topKinds)
		for k := 0; k < topKinds; k++ {
			d = append(d, bson.E{Key: topNames[k], Value: bson.D{
				{Key: "time", Value: ent[k].timeUS.Load()}, {Key: "count", Value: ent[k].count.Load()}}})
		}
		totals = append(totals, bson.E{Key: ns, Value: d})
	}
	return bson.D{{Key: "totals", Value: totals}}, nil
}
