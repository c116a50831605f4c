package mongoerr

// Codes of multi-document transactions (error_codes.yml); the session and
// retryable-write ones are in mongoerr.go.
const (
	ConflictingOperationInProgress = 117
	TransactionCommitted           = 256
)

func init() {
	names[ConflictingOperationInProgress] = "ConflictingOperationInProgress"
	names[TransactionCommitted] = "TransactionCommitted"
}
