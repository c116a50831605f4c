module github.com/mayflydb/mayfly

go 1.26.8

require (
	go.mongodb.org/mongo-driver/v2 v2.9.3
	go.uber.org/zap v1.28.0
)

require (
	github.com/stretchr/testify v1.9.0 // indirect
	go.uber.org/multierr v1.10.0 // indirect
)
