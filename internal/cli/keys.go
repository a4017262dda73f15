package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/agentcustody/custody/internal/gateway"
	"github.com/agentcustody/custody/internal/keyfile"
	"github.com/agentcustody/custody/internal/signer"
)

// Key file names `custody keys init` writes, the defaults `custody serve`
// looks for in --data-dir.
const signerKeyFile = "signer-ed25519.pem"

func newKeysCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "keys",
		Short: "Make the signing keys that several replicas share",
	}
	var dir, origin string
	initCmd := &cobra.Command{
		Use:   "init --dir DIR [--signer-origin ORIGIN]",
		Short: "Create the log key and the gateway token key (never overwriting)",
		Long: `Create DIR/` + signerKeyFile + ` (the signer's log key, a C2SP note signing key
"PRIVATE+KEY+<origin>+...", not PEM despite its name) and DIR/` + gateway.SigningKeyFile + `
(the gateway's token key), mode 0600, unless they exist (an existing file is
kept only if it is a valid key), and print the log's verifier key. DIR must be
writable by you alone. With --database-url every replica must be given these same two
files (e.g. kubectl create secret generic custody-keys --from-file=DIR/): a
replica never generates them.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" {
				return usageError{errors.New("--dir is required")}
			}
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return err
			}
			if err := privateDir(dir); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			sk := filepath.Join(dir, signerKeyFile)
			if err := regularOrMissing(sk); err != nil {
				return err
			}
			vkey, err := signer.CreateKeyFile(sk, origin)
			switch {
			case errors.Is(err, fs.ErrExist):
				// Kept only if it is a usable key for this origin.
				if vkey, err = signer.KeyFileVerifier(sk, origin); err != nil {
					return fmt.Errorf("existing %s is not a log key for %q (remove it to make a new one): %w", sk, origin, err)
				}
				fmt.Fprintf(out, "kept     %s (exists)\nlog verifier key: %s\n", sk, vkey)
			case err != nil:
				return err
			default:
				fmt.Fprintf(out, "created  %s\nlog verifier key: %s\n", sk, vkey)
			}
			gk := filepath.Join(dir, gateway.SigningKeyFile)
			if err := regularOrMissing(gk); err != nil {
				return err
			}
			if b, err := os.ReadFile(gk); err == nil {
				if _, err := keyfile.Parse(b); err != nil {
					return fmt.Errorf("existing %s is not a gateway key (remove it to make a new one): %w", gk, err)
				}
				fmt.Fprintf(out, "kept     %s (exists)\n", gk)
				return nil
			}
			if _, err := keyfile.LoadOrCreateEd25519(gk); err != nil {
				return fmt.Errorf("gateway key: %w", err)
			}
			fmt.Fprintf(out, "created  %s\n", gk)
			return nil
		},
	}
	initCmd.Flags().StringVar(&dir, "dir", "", "directory for the key files (created 0700; required)")
	initCmd.Flags().StringVar(&origin, "signer-origin", Defaults().SignerOrigin, "the log's origin, as custody serve --signer-origin")
	cmd.AddCommand(initCmd)
	return cmd
}

// privateDir refuses a key directory others could write to (they could
// plant a key that would then be "kept" and shipped): it must be a
// directory, owned by this user, not group- or world-writable.
func privateDir(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("--dir %s is not a directory", dir)
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("--dir %s is writable by others (mode %v): use a directory only you can write", dir, fi.Mode().Perm())
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Getuid() {
		return fmt.Errorf("--dir %s belongs to another user (uid %d)", dir, st.Uid)
	}
	return nil
}

// regularOrMissing refuses a key path that exists as anything but a
// regular file (a symlink, a directory).
func regularOrMissing(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s exists and is not a regular file (%v): remove it", path, fi.Mode().Type())
	}
	return nil
}
