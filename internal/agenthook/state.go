package agenthook

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// StateDir returns the directory for session state files:
// $CUSTODY_HOOK_STATE_DIR, else $XDG_STATE_HOME/custody/hooks (when
// absolute, as the XDG Base Directory spec requires), else
// $HOME/.local/state/custody/hooks. lookup is os.LookupEnv in production.
func StateDir(lookup func(string) (string, bool)) (string, error) {
	if d, _ := lookup("CUSTODY_HOOK_STATE_DIR"); d != "" {
		return d, nil
	}
	if d, _ := lookup("XDG_STATE_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "custody", "hooks"), nil
	}
	if h, _ := lookup("HOME"); h != "" {
		return filepath.Join(h, ".local", "state", "custody", "hooks"), nil
	}
	return "", fmt.Errorf("%w: set CUSTODY_HOOK_STATE_DIR (no XDG_STATE_HOME or HOME to put hook state in)", ErrConfig)
}

// sessionState is one session's state file, # Format:
//
//	{"v":1,"run":"RUN","next":{"ARGSKEY":2},"pending":{"ARGSKEY":["g-ARGSKEY-1"]}}
//
// run is the signer run registered for the session. next and pending
// exist only for an agent without tool_use_id (Gemini CLI): next counts
// the calls decided per [Event.ArgsKey], pending holds the call ids
// allowed to run (decided allow, or approved) and not yet completed, in
// the order they were allowed.
type sessionState struct {
	V       int                 `json:"v"`
	Run     string              `json:"run"`
	Next    map[string]int      `json:"next,omitempty"`
	Pending map[string][]string `json:"pending,omitempty"`
}

// stateFiles keeps one state file per session in dir (created 0700):
// <hex SHA-256 of agent NUL session_id, 32 digits>.json (0600), written by
// atomic rename, and beside it a .lock file. Every read-modify-write
// holds an exclusive flock(2) on the .lock file, so concurrent hook
// processes of one session (Claude Code runs matching hooks in
// parallel) see each other's writes and register one run.
type stateFiles struct {
	dir string
	// poll is how often a busy lock is retried until the context ends.
	poll time.Duration
}

func (s stateFiles) base(a Agent, session string) string {
	sum := sha256.Sum256([]byte(string(a) + "\x00" + session))
	return filepath.Join(s.dir, hex.EncodeToString(sum[:16]))
}

// update runs fn on the session's state under its lock and writes back
// what fn leaves (nothing when fn returns remove). A missing file is a
// zero state (Run ""). fn's error is returned and nothing is written.
func (s stateFiles) update(ctx context.Context, a Agent, session string, fn func(st *sessionState) (remove bool, err error)) error {
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return fmt.Errorf("%w: state directory: %w", ErrState, err)
	}
	base := s.base(a, session)
	unlock, err := lockFile(ctx, base+".lock", s.poll)
	if err != nil {
		return fmt.Errorf("%w: lock: %w", ErrState, err)
	}
	defer unlock()
	var st sessionState
	b, err := os.ReadFile(base + ".json")
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return fmt.Errorf("%w: read: %w", ErrState, err)
	default:
		if err := json.Unmarshal(b, &st); err != nil || st.V != 1 {
			return fmt.Errorf("%w: %s.json is not a hook state file", ErrState, base)
		}
	}
	remove, err := fn(&st)
	if err != nil {
		return err
	}
	if remove {
		if err := os.Remove(base + ".json"); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%w: remove: %w", ErrState, err)
		}
		_ = os.Remove(base + ".lock")
		return nil
	}
	st.V = 1
	b, _ = json.Marshal(st)
	return writeAtomic(base+".json", b)
}

// writeAtomic writes b to path through a 0600 temporary file in the same
// directory, synced and renamed over path.
func writeAtomic(path string, b []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return fmt.Errorf("%w: write: %w", ErrState, err)
	}
	tmp := f.Name()
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if err := f.Chmod(0o600); err != nil {
		return fmt.Errorf("%w: write: %w", ErrState, err)
	}
	if _, err := f.Write(b); err != nil {
		return fmt.Errorf("%w: write: %w", ErrState, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("%w: write: %w", ErrState, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("%w: write: %w", ErrState, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("%w: write: %w", ErrState, err)
	}
	ok = true
	return nil
}
