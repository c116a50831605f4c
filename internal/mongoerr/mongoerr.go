// Package mongoerr is MongoDB's error vocabulary: a code, its codeName and a
// message, rendered as {ok: 0, errmsg, code, codeName}. Every layer returns
// *Error for anything a client should see; anything else becomes
// InternalError at the command boundary.
package mongoerr

import (
	"errors"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Codes used by mayfly, with mongod's numbers (src/mongo/base/error_codes.yml).
const (
	InternalError               = 1
	BadValue                    = 2
	NoSuchKey                   = 4
	FailedToParse               = 9
	Unauthorized                = 13
	TypeMismatch                = 14
	AuthenticationFailed        = 18
	IllegalOperation            = 20
	NamespaceNotFound           = 26
	IndexNotFound               = 27
	PathNotViable               = 28
	ConflictingUpdateOperators  = 40
	CursorNotFound              = 43
	NamespaceExists             = 48
	MaxTimeMSExpired            = 50
	DollarPrefixedFieldName     = 52
	InvalidIdField              = 53
	NotSingleValueField         = 54
	EmptyFieldName              = 56
	DottedFieldName             = 57
	CommandNotFound             = 59
	ImmutableField              = 66
	CannotCreateIndex           = 67
	IndexAlreadyExists          = 68
	InvalidOptions              = 72
	InvalidNamespace            = 73
	IndexOptionsConflict        = 85
	IndexKeySpecsConflict       = 86
	CommandNotSupported         = 115
	UnknownError                = 8
	InvalidPipelineOperator     = 168
	ProtocolError               = 17
	QueryExceededMemoryLimit    = 292
	BSONObjectTooLarge          = 10334
	WriteConflict               = 112
	DuplicateKey                = 11000
	InvalidLength               = 16
	OperationFailed             = 96
	NotImplemented              = 238
	InvalidIndexSpecificationOp = 197
	UnknownReplWriteConcern     = 79
	ExceededMemoryLimit         = 146
	CommandFailed               = 125
	Overflow                    = 15
	ObjectIsBusy                = 314
	APIStrictError              = 323
	InvalidBSON                 = 22
	NoMatchingDocument          = 47
	ShutdownInProgress          = 91
	Interrupted                 = 11601
	ConversionFailure           = 241
	// Replication, sessions and retryable writes.
	AlreadyInitialized                     = 23
	NoReplicationEnabled                   = 76
	InvalidReplicaSetConfig                = 93
	NotSecondary                           = 95
	NewReplicaSetConfigurationIncompatible = 103
	ClusterTimeFailsRateLimiter            = 209
	InvalidResumeToken                     = 260
	ChangeStreamFatalError                 = 280
	ChangeStreamHistoryLost                = 286
	TransactionTooOld                      = 225
	NoSuchTransaction                      = 251
	ExceededTimeLimit                      = 262
	OperationNotSupportedInTransaction     = 263
	UnsatisfiableWriteConcern              = 100
)

var names = map[int32]string{
	1: "InternalError", 2: "BadValue", 4: "NoSuchKey", 8: "UnknownError", 9: "FailedToParse",
	13: "Unauthorized", 14: "TypeMismatch", 15: "Overflow", 16: "InvalidLength", 17: "ProtocolError",
	18: "AuthenticationFailed", 20: "IllegalOperation", 22: "InvalidBSON", 26: "NamespaceNotFound",
	27: "IndexNotFound", 28: "PathNotViable", 40: "ConflictingUpdateOperators", 43: "CursorNotFound",
	47: "NoMatchingDocument", 48: "NamespaceExists", 50: "MaxTimeMSExpired", 52: "DollarPrefixedFieldName",
	53: "InvalidIdField", 54: "NotSingleValueField", 55: "NotExactValueField", 112: "WriteConflict", 171: "CannotIndexParallelArrays", 51024: "Location51024", 56: "EmptyFieldName", 57: "DottedFieldName",
	59: "CommandNotFound", 66: "ImmutableField", 67: "CannotCreateIndex", 68: "IndexAlreadyExists",
	72: "InvalidOptions", 73: "InvalidNamespace", 79: "UnknownReplWriteConcern", 85: "IndexOptionsConflict",
	86: "IndexKeySpecsConflict", 91: "ShutdownInProgress", 96: "OperationFailed", 115: "CommandNotSupported",
	125: "CommandFailed", 146: "ExceededMemoryLimit", 168: "InvalidPipelineOperator", 10334: "BSONObjectTooLarge",
	197: "InvalidIndexSpecificationOption", 227: "CannotImplicitlyCreateCollection", 238: "NotImplemented",
	241: "ConversionFailure", 292: "QueryExceededMemoryLimitNoDiskUseAllowed", 314: "ObjectIsBusy",
	323: "APIStrictError", 11000: "DuplicateKey", 11601: "Interrupted",
	12: "UnsupportedFormat",
	23: "AlreadyInitialized", 76: "NoReplicationEnabled", 93: "InvalidReplicaSetConfig", 95: "NotSecondary",
	103: "NewReplicaSetConfigurationIncompatible", 209: "ClusterTimeFailsRateLimiter", 260: "InvalidResumeToken", 280: "ChangeStreamFatalError", 286: "ChangeStreamHistoryLost", 225: "TransactionTooOld",
	251: "NoSuchTransaction", 100: "UnsatisfiableWriteConcern", 262: "ExceededTimeLimit", 263: "OperationNotSupportedInTransaction",
}

// CodeName returns mongod's codeName for a code ("Location<code>" for the
// numbered assertion codes that have no name, as mongod reports them).
func CodeName(code int32) string {
	if n, ok := names[code]; ok {
		return n
	}
	return fmt.Sprintf("Location%d", code)
}

// Error is a MongoDB-shaped error.
type Error struct {
	Code int32
	Msg  string
	// Extra fields appended to the error reply or write error (e.g. keyPattern
	// and keyValue for duplicate keys).
	Extra bson.D
}

func (e *Error) Error() string { return fmt.Sprintf("%s (%d): %s", e.CodeName(), e.Code, e.Msg) }

// CodeName is the error's codeName.
func (e *Error) CodeName() string { return CodeName(e.Code) }

// New makes an error with a formatted message.
func New(code int32, format string, args ...any) *Error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...)}
}

// From converts any error to *Error: a wrapped *Error is returned as is,
// anything else becomes InternalError with the error's text.
func From(err error) *Error {
	if err == nil {
		return nil
	}
	var me *Error
	if errors.As(err, &me) {
		return me
	}
	return &Error{Code: InternalError, Msg: err.Error()}
}

// Reply renders the error as a command reply document.
func (e *Error) Reply() bson.D {
	d := bson.D{{Key: "ok", Value: 0.0}, {Key: "errmsg", Value: e.Msg}, {Key: "code", Value: e.Code}, {Key: "codeName", Value: e.CodeName()}}
	return append(d, e.Extra...)
}

// WriteError renders the error as an element of writeErrors.
func (e *Error) WriteError(index int) bson.D {
	d := bson.D{{Key: "index", Value: int32(index)}, {Key: "code", Value: e.Code}}
	d = append(d, e.Extra...)
	return append(d, bson.E{Key: "errmsg", Value: e.Msg})
}

// Is reports whether err is a mongoerr.Error with the given code.
func Is(err error, code int32) bool {
	var me *Error
	return errors.As(err, &me) && me.Code == code
}
