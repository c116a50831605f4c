package mongoerr

// Codes of authentication and user management (error_codes.yml).
const (
	UserNotFound         = 11
	RoleNotFound         = 31
	MechanismUnavailable = 334
	// UserAlreadyExists is the assertion createUser raises for a taken name.
	UserAlreadyExists = 51003
)

func init() {
	names[UserNotFound] = "UserNotFound"
	names[RoleNotFound] = "RoleNotFound"
	names[MechanismUnavailable] = "MechanismUnavailable"
}
