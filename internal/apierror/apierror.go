// Package apierror writes the JSON error body that every custody HTTP API
// answers with:
//
//	{"error":"<code>","message":"<human text>"}
//
// code is a short snake_case word from a finite set owned by the domain
// package that refuses (for example "namespace_mismatch", "warm_pool",
// "lease_held"); message is fixed text for humans. Neither ever contains a
// key, a token or the text of an upstream error.
package apierror

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// Body is the JSON error body. Extra fields (such as limit_bytes for 413)
// go in Details and are merged into the top-level object.
type Body struct {
	Code    string
	Message string
	Details map[string]any
}

// MarshalJSON flattens Details next to "error" and "message".
func (b Body) MarshalJSON() ([]byte, error) {
	m := make(map[string]any, len(b.Details)+2)
	for k, v := range b.Details {
		m[k] = v
	}
	m["error"] = b.Code
	if b.Message != "" {
		m["message"] = b.Message
	}
	return json.Marshal(m)
}

// Write sends status with the body {"error":code,"message":message}.
func Write(w http.ResponseWriter, status int, code, message string) {
	WriteBody(w, status, Body{Code: code, Message: message})
}

// WriteBody sends status with b as JSON.
func WriteBody(w http.ResponseWriter, status int, b Body) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(b)
}

// Unavailable sends 503 with a Retry-After header in whole seconds
// (at least 1).
func Unavailable(w http.ResponseWriter, retryAfter time.Duration, code, message string) {
	secs := int(retryAfter.Round(time.Second) / time.Second)
	if secs < 1 {
		secs = 1
	}
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	Write(w, http.StatusServiceUnavailable, code, message)
}
