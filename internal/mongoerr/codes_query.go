package mongoerr

// Codes of read concern and the Stable API (error_codes.yml).
const (
	NotAReplicaSet      = 123
	APIVersionError     = 322
	APIDeprecationError = 336
)

func init() {
	names[NotAReplicaSet] = "NotAReplicaSet"
	names[APIVersionError] = "APIVersionError"
	names[APIDeprecationError] = "APIDeprecationError"
}
