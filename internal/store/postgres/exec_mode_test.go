package postgres

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/agentcustody/custody/internal/apikey"
	"github.com/agentcustody/custody/internal/gateway"
	"github.com/agentcustody/custody/internal/memory"
	"github.com/agentcustody/custody/internal/metering"
	"github.com/agentcustody/custody/internal/signer"
	"github.com/agentcustody/custody/internal/store/postgres/pgtest"
	"github.com/agentcustody/custody/internal/store/storetest"
	"github.com/agentcustody/custody/internal/witness"
)

// TestStoresUnderExecModes: every conformance suite passes under each
// exec mode Open accepts besides pgx's default (cache_statement, which
// every other test uses). Under exec, arguments go over in text format
// without a describe first, so a JSON value sent as []byte would arrive
// as bytea text and be refused (it once was, for a lease's holder).
func TestStoresUnderExecModes(t *testing.T) {
	for _, mode := range []string{"cache_describe", "describe_exec", "exec"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			open := func(tb testing.TB) *DB { return openMode(tb, mode, "read committed", 0) }
			t.Run("Memory", func(t *testing.T) {
				storetest.Memory(t, func(tb testing.TB) memory.Store { return open(tb) })
			})
			t.Run("Keys", func(t *testing.T) {
				storetest.Keys(t, func(tb testing.TB) apikey.Store { return open(tb) })
			})
			t.Run("Metering", func(t *testing.T) {
				storetest.Metering(t, func(tb testing.TB) metering.Store { return open(tb) })
			})
			t.Run("Gateway", func(t *testing.T) {
				storetest.Gateway(t, func(tb testing.TB) gateway.Store { return open(tb) })
			})
			t.Run("Signer", func(t *testing.T) {
				storetest.Signer(t, func(tb testing.TB) signer.Store { return open(tb) })
			})
			t.Run("Witness", func(t *testing.T) {
				storetest.Witness(t, func(tb testing.TB) witness.Store { return open(tb) })
			})
		})
	}
}

// TestOpenRefusesSimpleProtocol: Open refuses default_query_exec_mode=
// simple_protocol, in a URL and in a key=value string, before it
// connects, with an error that names the mode and not the password.
func TestOpenRefusesSimpleProtocol(t *testing.T) {
	base, err := url.Parse(pgtest.ServerURL())
	if err != nil {
		t.Fatal(err)
	}
	base.User = url.UserPassword("custody", "s3cret-password")
	q := base.Query()
	q.Set("default_query_exec_mode", "simple_protocol")
	base.RawQuery = q.Encode()
	for _, dsn := range []string{
		base.String(),
		"host=127.0.0.1 port=1 user=custody password=s3cret-password dbname=custody default_query_exec_mode=simple_protocol",
	} {
		db, err := Open(context.Background(), dsn)
		if err == nil {
			db.Close()
			t.Fatalf("Open(simple_protocol) succeeded")
		}
		if !errors.Is(err, errSimpleProtocol) {
			t.Errorf("Open(simple_protocol) = %v, want errSimpleProtocol", err)
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("the refusal quotes the password: %v", err)
		}
	}
}
