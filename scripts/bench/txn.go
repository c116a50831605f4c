package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync/atomic"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.uber.org/zap"

	"github.com/mayflydb/mayfly/server"
)

// The transactions phase runs its own on-disk server in replica-set mode
// (--replSet; transactions need it, as in mongod) and measures, in
// interleaved slices so that both see the same machine:
//
//   - ping on that server: its wire ceiling;
//   - a two-document transfer: session.WithTransaction around two
//     updateOne($inc) of accounts drawn uniformly from txnAccounts, then
//     commitTransaction — one op is one committed transfer, its retries
//     after a write conflict included. The ratio is transfers/s ÷ ping/s.
const (
	txnSlices   = 5
	txnAccounts = 10_000
)

func (b *bench) transactions(ctx context.Context) error {
	dir := filepath.Join(b.dir, "txn")
	srv, err := server.Start(server.Config{Bind: "127.0.0.1", Port: 0, DBPath: dir, Logger: zap.NewNop(), ReplSetName: "rs0"})
	if err != nil {
		return err
	}
	defer srv.Close()
	cl, err := connect(srv.URI(), b.cfg.clients)
	if err != nil {
		return err
	}
	defer cl.Disconnect(context.Background())
	accounts := cl.Database("bench").Collection("accounts")
	docs := make([]any, 0, txnAccounts)
	for i := 0; i < txnAccounts; i++ {
		docs = append(docs, bson.D{{Key: "_id", Value: int32(i)}, {Key: "balance", Value: int64(1_000_000)}})
	}
	if _, err := accounts.InsertMany(ctx, docs); err != nil {
		return err
	}
	sessions := make([]*mongo.Session, b.cfg.clients)
	for i := range sessions {
		if sessions[i], err = cl.StartSession(); err != nil {
			return err
		}
		defer sessions[i].EndSession(context.Background())
	}
	ping := bson.D{{Key: "ping", Value: 1}}
	var pm, tm measure
	var retries atomic.Int64
	for i := 0; i < txnSlices; i++ {
		m, err := runPhase(fmt.Sprintf("txn server ping %d/%d", i+1, txnSlices), b.cfg.clients, b.cfg.duration/txnSlices, b.cfg.seed+uint64(2*i),
			func(int, *rand.Rand) (int, error) {
				return 1, cl.Database("admin").RunCommand(ctx, ping).Err()
			})
		if err != nil {
			return err
		}
		pm.add(m)
		m, err = runPhase(fmt.Sprintf("two-document transfer %d/%d", i+1, txnSlices), b.cfg.clients, b.cfg.duration/txnSlices, b.cfg.seed+uint64(2*i+1),
			func(w int, r *rand.Rand) (int, error) {
				from := int32(r.IntN(txnAccounts))
				to := int32(r.IntN(txnAccounts - 1))
				if to >= from {
					to++
				}
				attempts := 0
				_, err := sessions[w].WithTransaction(ctx, func(sc context.Context) (any, error) {
					attempts++
					if _, err := accounts.UpdateOne(sc, bson.D{{Key: "_id", Value: from}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "balance", Value: int64(-1)}}}}); err != nil {
						return nil, err
					}
					_, err := accounts.UpdateOne(sc, bson.D{{Key: "_id", Value: to}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "balance", Value: int64(1)}}}})
					return nil, err
				})
				retries.Add(int64(attempts - 1))
				return 1, err
			})
		if err != nil {
			return err
		}
		tm.add(m)
	}
	b.rep.add(Result{Name: "wire ceiling (ping), replica-set server", Group: "transactions", Unit: "ops",
		Note: "ping on the --replSet server the transfers run on"}, &pm, "", 0)
	b.rep.add(Result{Name: "transaction: two-document transfer", Group: "transactions", Unit: "ops",
		Note: fmt.Sprintf("withTransaction{2 × updateOne($inc)} + commit over %d accounts; %d retries after a write conflict; ratio: transfers/s ÷ ping/s", txnAccounts, retries.Load())},
		&tm, "ping (replica set)", pm.perSec())
	return nil
}
