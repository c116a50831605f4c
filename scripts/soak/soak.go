package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// Guarantee classes of write concerns.
const (
	journaled   = "journaled"   // on stable storage before the reply: a kill loses none
	unjournaled = "unjournaled" // may be lost if acknowledged within the commit interval
	noAck       = "none"        // w: 0 promises nothing
)

// wcSpec is one write concern the writers use, spelled as clients do.
type wcSpec struct {
	name  string
	class string
	wc    bson.D
}

var writeConcerns = []wcSpec{
	{"{j:true}", journaled, bson.D{{Key: "j", Value: true}}},
	{"{j:1}", journaled, bson.D{{Key: "j", Value: int32(1)}}},
	{"{j:1.0}", journaled, bson.D{{Key: "j", Value: 1.0}}},
	{"{w:1,j:NumberLong(1)}", journaled, bson.D{{Key: "w", Value: int32(1)}, {Key: "j", Value: int64(1)}}},
	{"{fsync:1}", journaled, bson.D{{Key: "fsync", Value: int32(1)}}},
	{"{w:'majority',j:true}", journaled, bson.D{{Key: "w", Value: "majority"}, {Key: "j", Value: true}}},
	{"{} (default)", unjournaled, bson.D{}},
	{"{w:1}", unjournaled, bson.D{{Key: "w", Value: int32(1)}}},
	{"{w:1,j:false}", unjournaled, bson.D{{Key: "w", Value: int32(1)}, {Key: "j", Value: false}}},
	{"{w:'majority'}", unjournaled, bson.D{{Key: "w", Value: "majority"}}},
	{"{w:0}", noAck, bson.D{{Key: "w", Value: int32(0)}}},
}

// ack is one acknowledged insert: its _id and when the reply arrived.
type ack struct {
	id string
	at time.Time
}

type soak struct {
	cfg    *config
	dbpath string
	log    io.Writer
	rng    *rand.Rand
	srv    *server
	rep    *report
	// survivors: per write round, how many documents the check after its
	// kill found; every later restart must still find them all.
	survivors map[int]int64
}

func newSoak(cfg *config, dbpath string, log io.Writer) *soak {
	return &soak{cfg: cfg, dbpath: dbpath, log: log, rng: rand.New(rand.NewPCG(cfg.seed, 21)),
		rep: newReport(cfg), survivors: map[int]int64{}}
}

func (s *soak) logf(format string, args ...any) {
	if s.cfg.verbose {
		fmt.Fprintf(s.log, "soak %s: "+format+"\n", append([]any{time.Now().Format("15:04:05.000")}, args...)...)
	}
}

func (s *soak) run(ctx context.Context) (*report, error) {
	var err error
	if s.srv, err = start(s.cfg.binary, s.dbpath, s.cfg.commitMS); err != nil {
		return s.rep, err
	}
	defer func() {
		if s.srv != nil {
			s.srv.stop()
		}
	}()
	begin := time.Now()
	phases := []func(context.Context, int) error{
		func(ctx context.Context, _ int) error { return s.hostile(ctx, bigFrame) },
		func(ctx context.Context, _ int) error { return s.hostile(ctx, noRead) },
		func(ctx context.Context, _ int) error { return s.fuzz(ctx) },
	}
	for round := 0; ctx.Err() == nil && (time.Since(begin) < s.cfg.duration || round < len(phases)); round++ {
		if err := s.writeRound(ctx, round); err != nil {
			return s.rep, err
		}
		if ctx.Err() != nil {
			break
		}
		if err := phases[round%len(phases)](ctx, round); err != nil {
			return s.rep, err
		}
		if err := s.ensureUp("after round " + fmt.Sprint(round)); err != nil {
			return s.rep, err
		}
		s.rep.rounds++
	}
	s.rep.elapsed = time.Since(begin)
	return s.rep, nil
}

// ensureUp records a crash if the server exited on its own, and restarts
// it.
func (s *soak) ensureUp(when string) error {
	if s.srv.alive() {
		return nil
	}
	if !s.srv.killed {
		s.rep.crashes = append(s.rep.crashes, fmt.Sprintf("%s: mayfly exited (%v); last log lines:\n    %s",
			when, s.srv.state, strings.Join(s.srv.lastLines(), "\n    ")))
	}
	return s.restart()
}

func (s *soak) restart() error {
	srv, err := start(s.cfg.binary, s.dbpath, s.cfg.commitMS)
	if err != nil {
		return fmt.Errorf("restart: %w", err)
	}
	s.srv = srv
	s.rep.restarts++
	return nil
}

func (s *soak) connect(pool uint64) (*mongo.Client, error) {
	return mongo.Connect(options.Client().ApplyURI("mongodb://" + s.srv.addr + "/?directConnection=true").
		SetMaxPoolSize(pool).SetServerSelectionTimeout(5 * time.Second).SetTimeout(30 * time.Second))
}

func disconnect(c *mongo.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	c.Disconnect(ctx)
}

// writeRound runs the writers until a kill -9 at a random moment, restarts
// the server and checks what survived.
func (s *soak) writeRound(ctx context.Context, round int) error {
	client, err := s.connect(uint64(len(writeConcerns) * s.cfg.writers))
	if err != nil {
		return err
	}
	coll := fmt.Sprintf("r%d", round)
	db := client.Database("soak")
	var (
		mu       sync.Mutex
		acks     = map[string][]ack{}
		wg       sync.WaitGroup
		nErr     int
		firstErr error
		stop     = make(chan struct{})
	)
	pad := strings.Repeat("p", 64+s.rng.IntN(512))
	// Every other round has no journaled writers: their syncs flush the
	// whole write-ahead log, unjournaled writes included, so only without
	// them does the loss window of unjournaled writes show.
	wcs := writeConcerns
	if round%2 == 1 {
		wcs = nil
		for _, wc := range writeConcerns {
			if wc.class != journaled {
				wcs = append(wcs, wc)
			}
		}
	}
	for _, wc := range wcs {
		for g := 0; g < s.cfg.writers; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for n := 0; ; n++ {
					select {
					case <-stop:
						return
					default:
					}
					id := fmt.Sprintf("%s/%d/%d", wc.name, g, n)
					c, cancel := context.WithTimeout(context.Background(), 2*time.Second)
					err := db.RunCommand(c, bson.D{
						{Key: "insert", Value: coll},
						{Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: id}, {Key: "pad", Value: pad}}}},
						{Key: "writeConcern", Value: wc.wc},
					}).Err()
					cancel()
					if err != nil {
						// The server is gone: nothing more is acknowledged.
						// Any other error is a failed write, not an ack.
						if !s.srv.alive() {
							return
						}
						mu.Lock()
						if nErr++; firstErr == nil {
							firstErr = err
						}
						mu.Unlock()
						time.Sleep(10 * time.Millisecond)
						continue
					}
					at := time.Now()
					mu.Lock()
					acks[wc.name] = append(acks[wc.name], ack{id, at})
					mu.Unlock()
				}
			}()
		}
	}
	d := s.cfg.killMin + time.Duration(s.rng.Int64N(int64(s.cfg.killMax-s.cfg.killMin)+1))
	select {
	case <-time.After(d):
	case <-ctx.Done():
	}
	crashed := !s.srv.alive()
	killedAt := time.Now()
	s.srv.kill9()
	close(stop)
	wg.Wait()
	disconnect(client)
	if crashed {
		s.srv.killed = false
		if err := s.ensureUp(fmt.Sprintf("write round %d", round)); err != nil {
			return err
		}
	} else if err := s.restart(); err != nil {
		return err
	}
	s.rep.kills++
	present, err := s.presentIDs(coll)
	if err != nil {
		return err
	}
	total := 0
	for _, wc := range wcs {
		st := s.rep.wc(wc)
		for _, a := range acks[wc.name] {
			total++
			st.acked++
			if present[a.id] {
				continue
			}
			age := killedAt.Sub(a.at)
			st.lost++
			if age > st.oldestLost {
				st.oldestLost = age
			}
			if wc.class == journaled || wc.class == unjournaled && age > s.window() {
				if len(st.examples) < 3 {
					st.examples = append(st.examples, fmt.Sprintf("round %d: %s acknowledged %v before the kill", round, a.id, age.Round(time.Millisecond)))
				}
				st.broken++
			}
		}
	}
	s.survivors[round] = int64(len(present))
	s.logf("round %d: killed after %v; %d inserts acknowledged, %d present; %d failed, the kill included (first: %v)", round, d.Round(time.Millisecond), total, len(present), nErr, firstErr)
	if total == 0 {
		s.rep.idleRounds = append(s.rep.idleRounds, fmt.Sprintf("round %d: no insert acknowledged in %v; %d failed (first: %v)", round, d.Round(time.Millisecond), nErr, firstErr))
	}
	// Earlier rounds' survivors survive this kill too.
	for r, n := range s.survivors {
		if r == round {
			continue
		}
		c, err := s.connect(1)
		if err != nil {
			return err
		}
		got, err := c.Database("soak").Collection(fmt.Sprintf("r%d", r)).CountDocuments(ctx, bson.D{})
		disconnect(c)
		if err != nil {
			return err
		}
		if got != n {
			s.rep.laterLoss = append(s.rep.laterLoss, fmt.Sprintf("round %d: %d documents after its restart, %d after round %d's", r, n, got, round))
			s.survivors[r] = got
		}
	}
	return nil
}

// window is how long before a kill an unjournaled write may have been
// acknowledged and still be lost.
func (s *soak) window() time.Duration {
	return time.Duration(s.cfg.commitMS)*time.Millisecond + s.cfg.margin
}

func (s *soak) presentIDs(coll string) (map[string]bool, error) {
	client, err := s.connect(1)
	if err != nil {
		return nil, err
	}
	defer disconnect(client)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cur, err := client.Database("soak").Collection(coll).Find(ctx, bson.D{}, options.Find().SetProjection(bson.D{{Key: "_id", Value: 1}}))
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for cur.Next(ctx) {
		out[cur.Current.Lookup("_id").StringValue()] = true
	}
	return out, cur.Err()
}
