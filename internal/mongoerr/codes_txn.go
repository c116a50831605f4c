package mongoerr

// Codes of sessions and transactions (error_codes.yml).
const (
	ConflictingOperationInProgress     = 117
	TransactionTooOld                  = 225
	NoSuchTransaction                  = 251
	TransactionCommitted               = 256
	OperationNotSupportedInTransaction = 263
)

func init() {
	names[ConflictingOperationInProgress] = "ConflictingOperationInProgress"
	names[TransactionTooOld] = "TransactionTooOld"
	names[NoSuchTransaction] = "NoSuchTransaction"
	names[TransactionCommitted] = "TransactionCommitted"
	names[OperationNotSupportedInTransaction] = "OperationNotSupportedInTransaction"
}
