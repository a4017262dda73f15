package postgres

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAttackOpenRefusesSimpleProtocolFromServiceFile: a service file
// (PGSERVICEFILE/PGSERVICE, or servicefile/service in the URL) is one more
// way pgx reads default_query_exec_mode; Open must refuse simple_protocol
// arriving that way too, before it connects, without the password.
func TestAttackOpenRefusesSimpleProtocolFromServiceFile(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "pg_service.conf")
	if err := os.WriteFile(f, []byte("[custody]\nhost=127.0.0.1\nport=1\nuser=custody\npassword=s3cret-password\ndbname=custody\ndefault_query_exec_mode=simple_protocol\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, dsn := range map[string]string{
		"env": "",
		"url": "postgres://custody:s3cret-password@127.0.0.1:1/custody?service=custody&servicefile=" + f,
		"kv":  "service=custody servicefile=" + f + " password=s3cret-password",
	} {
		t.Run(name, func(t *testing.T) {
			if dsn == "" {
				t.Setenv("PGSERVICEFILE", f)
				t.Setenv("PGSERVICE", "custody")
				dsn = "host=127.0.0.1 port=1 password=s3cret-password"
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5e9)
			defer cancel()
			db, err := Open(ctx, dsn)
			if err == nil {
				db.Close()
				t.Fatal("Open succeeded")
			}
			if !errors.Is(err, errSimpleProtocol) {
				t.Errorf("Open = %v, want errSimpleProtocol", err)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("the error quotes the password: %v", err)
			}
		})
	}
}

// TestAttackOpenBadExecModeKeepsPassword: a mode pgx does not know (a
// case variant of simple_protocol, say) is refused without quoting the
// URL's password.
func TestAttackOpenBadExecModeKeepsPassword(t *testing.T) {
	for _, mode := range []string{"SIMPLE_PROTOCOL", "Simple_Protocol", "simple_protocol%20", "simple", "%20simple_protocol"} {
		for _, dsn := range []string{
			"postgres://custody:s3cret-password@127.0.0.1:1/custody?default_query_exec_mode=" + mode,
			"host=127.0.0.1 port=1 user=custody password=s3cret-password default_query_exec_mode='" + strings.ReplaceAll(mode, "%20", " ") + "'",
		} {
			ctx, cancel := context.WithTimeout(context.Background(), 5e9)
			db, err := Open(ctx, dsn)
			cancel()
			if err == nil {
				db.Close()
				t.Fatalf("Open(%q) succeeded", dsn)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("Open(mode %q) quotes the password: %v", mode, err)
			}
		}
	}
}
