package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

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
		Long: `Create DIR/` + signerKeyFile + ` (the signer's log key) and DIR/` + gateway.SigningKeyFile + `
(the gateway's token key), mode 0600, unless they exist, and print the log's
verifier key. With --database-url every replica must be given these same two
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
			out := cmd.OutOrStdout()
			sk := filepath.Join(dir, signerKeyFile)
			vkey, err := signer.CreateKeyFile(sk, origin)
			switch {
			case errors.Is(err, fs.ErrExist):
				fmt.Fprintf(out, "kept     %s (exists)\n", sk)
			case err != nil:
				return err
			default:
				fmt.Fprintf(out, "created  %s\nlog verifier key: %s\n", sk, vkey)
			}
			gk := filepath.Join(dir, gateway.SigningKeyFile)
			if _, err := os.Stat(gk); err == nil {
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
