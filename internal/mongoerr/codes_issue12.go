package mongoerr

// Codes added for issue 12 (kept in their own file to stay clear of the
// table in mongoerr.go).
const (
	CannotConvertIndexToUnique = 359
)

func init() {
	names[CannotConvertIndexToUnique] = "CannotConvertIndexToUnique"
}
