package emulator

import (
	"errors"
	"net/http"

	"google.golang.org/grpc/codes"
)

var (
	// ErrConfig: the server's configuration is invalid (flag rules,
	// unreadable or malformed configuration files). Not retried.
	ErrConfig = errors.New("emulator: invalid configuration")
	// ErrLoad: the model failed to load after every retry.
	ErrLoad = errors.New("emulator: model failed to load")
	// ErrWarmup: replaying the warmup file failed.
	ErrWarmup = errors.New("emulator: warmup failed")
)

// StartError is why a server did not start, in TF Serving's terms: a
// canonical code and a message. Its Error() reads like TF's status,
// "INVALID_ARGUMENT: ...", so that the command prints TF's "Failed to
// start server. Error: " line in front of it.
type StartError struct {
	Code codes.Code
	Msg  string
	Err  error // the sentinel: ErrConfig, ErrLoad or ErrWarmup
}

func (e *StartError) Error() string { return CodeName(e.Code) + ": " + e.Msg }

// Unwrap returns the sentinel.
func (e *StartError) Unwrap() error { return e.Err }

// CodeName is TF's name of a canonical code: INVALID_ARGUMENT, NOT_FOUND.
func CodeName(c codes.Code) string {
	switch c {
	case codes.OK:
		return "OK"
	case codes.Canceled:
		return "CANCELLED"
	case codes.Unknown:
		return "UNKNOWN"
	case codes.InvalidArgument:
		return "INVALID_ARGUMENT"
	case codes.DeadlineExceeded:
		return "DEADLINE_EXCEEDED"
	case codes.NotFound:
		return "NOT_FOUND"
	case codes.AlreadyExists:
		return "ALREADY_EXISTS"
	case codes.PermissionDenied:
		return "PERMISSION_DENIED"
	case codes.ResourceExhausted:
		return "RESOURCE_EXHAUSTED"
	case codes.FailedPrecondition:
		return "FAILED_PRECONDITION"
	case codes.Aborted:
		return "ABORTED"
	case codes.OutOfRange:
		return "OUT_OF_RANGE"
	case codes.Unimplemented:
		return "UNIMPLEMENTED"
	case codes.Internal:
		return "INTERNAL"
	case codes.Unavailable:
		return "UNAVAILABLE"
	case codes.DataLoss:
		return "DATA_LOSS"
	case codes.Unauthenticated:
		return "UNAUTHENTICATED"
	}
	return c.String()
}

// httpStatus maps a canonical code to the HTTP status TF Serving's REST API
// answers with.
func httpStatus(c codes.Code) int {
	switch c {
	case codes.OK:
		return http.StatusOK
	case codes.Canceled:
		return 499
	case codes.InvalidArgument, codes.FailedPrecondition, codes.OutOfRange:
		return http.StatusBadRequest
	case codes.DeadlineExceeded:
		return http.StatusGatewayTimeout
	case codes.NotFound:
		return http.StatusNotFound
	case codes.AlreadyExists, codes.Aborted:
		return http.StatusConflict
	case codes.PermissionDenied:
		return http.StatusForbidden
	case codes.ResourceExhausted:
		return http.StatusTooManyRequests
	case codes.Unimplemented:
		return http.StatusNotImplemented
	case codes.Unavailable:
		return http.StatusServiceUnavailable
	case codes.Unauthenticated:
		return http.StatusUnauthorized
	}
	return http.StatusInternalServerError
}
