package engine

import (
	"bytes"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// BenchmarkMarshalReplyBatch encodes a getMore reply of 1000 usertable
// documents (~1.1 MB): what a full scan pays per batch.
func BenchmarkMarshalReplyBatch(b *testing.B) {
	doc := bson.D{{Key: "_id", Value: "user1"}}
	for i := 0; i < 10; i++ {
		doc = append(doc, bson.E{Key: "field" + string(rune('0'+i)), Value: string(bytes.Repeat([]byte{'x'}, 100))})
	}
	raw, _ := bson.Marshal(doc)
	batch := bson.A{}
	for i := 0; i < 1000; i++ {
		batch = append(batch, bson.Raw(raw))
	}
	reply := bson.D{{Key: "cursor", Value: bson.D{{Key: "nextBatch", Value: batch}, {Key: "id", Value: int64(42)}, {Key: "ns", Value: "db.c"}}}, {Key: "ok", Value: 1.0}}
	b.Run("bson.Marshal", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := bson.Marshal(reply); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("marshalReply", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := marshalReply(reply); err != nil {
				b.Fatal(err)
			}
		}
	})
}
