//go:build !unix

package agenthook

import (
	"context"
	"errors"
	"time"
)

// lockFile is not implemented without flock(2): hooks fail closed.
func lockFile(context.Context, string, time.Duration) (func(), error) {
	return nil, errors.New("session state locking needs a Unix system")
}
